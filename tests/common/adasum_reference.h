// Adasum's closed form, shared by the host (tests/mpi/test_adasum.cc) and device
// (tests/gpu/test_nccl_collectives.cc) tests: any two vectors combine as
// (1 - a.b/2|a|^2) a + (1 - a.b/2|b|^2) b (a zero vector's coefficient is 1: it adds nothing),
// and more participants combine pairwise up a binary tree, left half with right half. Computed on
// whole vectors in double, independently of the runtime's recursive halving.
#pragma once

#include <cstddef>
#include <vector>

namespace hvd::test {

inline bool power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

inline std::vector<double> adasum_combine(const std::vector<double>& a, const std::vector<double>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) ab += a[i] * b[i], aa += a[i] * a[i], bb += b[i] * b[i];
  const double ca = aa > 0 ? 1 - ab / (2 * aa) : 1, cb = bb > 0 ? 1 - ab / (2 * bb) : 1;
  std::vector<double> out(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) out[i] = ca * a[i] + cb * b[i];
  return out;
}

// Adasum of vs[lo, hi): the left half's result combined with the right half's.
inline std::vector<double> adasum_tree(const std::vector<std::vector<double>>& vs, std::size_t lo, std::size_t hi) {
  if (hi - lo == 1) return vs[lo];
  const std::size_t mid = lo + (hi - lo) / 2;
  return adasum_combine(adasum_tree(vs, lo, mid), adasum_tree(vs, mid, hi));
}

inline std::vector<double> adasum_tree(const std::vector<std::vector<double>>& vs) {
  return adasum_tree(vs, 0, vs.size());
}

}  // namespace hvd::test
