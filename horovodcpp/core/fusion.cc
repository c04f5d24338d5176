#include "core/fusion.h"

#include <limits>

#include "core/collective_traits.h"

namespace hvd::detail {
namespace {

bool compatible(const Response& a, const Response& b) {
  const CollectiveTraits* traits = find_traits(a.type);
  if (traits == nullptr || !traits->fusable || b.type != a.type) return false;
  if (a.dtype != b.dtype || (a.device == kCpuDevice) != (b.device == kCpuDevice)) return false;
  return !traits->reduces || (a.reduce_op == b.reduce_op && a.prescale_factor == b.prescale_factor &&
                              a.postscale_factor == b.postscale_factor);
}

// What a response moves through the fusion buffer: the gathered result for a per-rank first
// dimension (first_dims holds every rank's rows), otherwise the tensors themselves.
std::int64_t fused_bytes(const Response& r) {
  const CollectiveTraits* traits = find_traits(r.type);
  if (traits == nullptr || !traits->fusable) return 0;
  if (!traits->per_rank_first_dim || r.first_dims.empty() || r.shapes.empty()) return r.total_bytes();
  const std::size_t ranks = r.first_dims.size() / r.shapes.size();
  std::int64_t total = 0;
  for (std::size_t t = 0; t < r.shapes.size(); ++t) {
    const TensorShape& s = r.shapes[t];
    const std::int64_t row = s.empty() ? 1 : num_elements(TensorShape(s.begin() + 1, s.end()));
    for (std::size_t k = 0; k < ranks; ++k) {
      // Saturating: a corrupt or absurd response must not overflow (it then fuses with nothing).
      std::int64_t bytes = 0;
      if (__builtin_mul_overflow(r.first_dims[t * ranks + k], row, &bytes) ||
          __builtin_mul_overflow(bytes, dtype_size(r.dtype), &bytes) || __builtin_add_overflow(total, bytes, &total))
        return std::numeric_limits<std::int64_t>::max();
    }
  }
  return total;
}

}  // namespace

std::vector<Response> fuse_responses(std::vector<Response> responses, std::int64_t threshold_bytes) {
  if (threshold_bytes <= 0) return responses;
  std::vector<Response> fused;
  std::vector<std::int64_t> sizes;
  for (auto& r : responses) {
    const std::int64_t bytes = fused_bytes(r);
    bool merged = false;
    // Look back for an open fused response this one fits into.
    for (std::size_t i = 0; i < fused.size() && !merged; ++i) {
      if (!compatible(fused[i], r) || bytes > threshold_bytes - sizes[i]) continue;  // no overflow
      for (auto& n : r.names) fused[i].names.push_back(std::move(n));
      for (auto& s : r.shapes) fused[i].shapes.push_back(std::move(s));
      for (auto d : r.first_dims) fused[i].first_dims.push_back(d);
      sizes[i] += bytes;
      merged = true;
    }
    if (!merged) {
      sizes.push_back(bytes);
      fused.push_back(std::move(r));
    }
  }
  return fused;
}

}  // namespace hvd::detail
