// Adasum on host memory against closed forms: orthogonal vectors add up, parallel ones average,
// any two combine as (1 - a.b/2|a|^2) a + (1 - a.b/2|b|^2) b, and more ranks combine pairwise up
// a binary tree (tests/common/adasum_reference.h: on whole vectors in double, independently of
// the runtime's halving). Every floating dtype, fused tensors each with its own dot products,
// scale factors, process sets, identical results on every rank, and the refusals (integers,
// reducescatter, a number of ranks that is not a power of two), each leaving the runtime usable.
// ctest runs it at np=1, 2, 3 and 4, and with fusion off.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "test_support.h"
#include "tests/common/adasum_reference.h"

using namespace hvd;
using hvd::test::adasum_combine;
using hvd::test::adasum_tree;
using hvd::test::filled;
using hvd::test::power_of_two;
using hvd::test::read_as_double;

namespace {

using Vector = std::vector<double>;

// Rank r's vector for tensor `k` of length n: deterministic, different per rank and tensor.
Vector contribution(int r, int k, std::int64_t n) {
  Vector v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    v[static_cast<std::size_t>(i)] = std::sin(1.3 * (i + 1) + 0.7 * r + 2.1 * k) + 0.25 * ((r + i) % 3);
  return v;
}

std::shared_ptr<HostTensor> tensor_of(DataType dtype, const Vector& v) {
  return filled(dtype, {static_cast<std::int64_t>(v.size())}, [&](std::int64_t i) { return v[static_cast<std::size_t>(i)]; });
}

// Relative error allowed for a dtype: the inputs are rounded to it, the result too.
double tolerance(DataType dtype) {
  switch (dtype) {
    case DataType::Float64: return 1e-12;
    case DataType::Float32: return 1e-5;
    case DataType::Float16: return 4e-3;
    default: return 3e-2;  // bfloat16
  }
}

// The values a rank submits, as the dtype stores them.
Vector rounded(DataType dtype, const Vector& v) {
  auto t = tensor_of(dtype, v);
  Vector out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = read_as_double(*t, static_cast<std::int64_t>(i));
  return out;
}

void check_close(const HostTensor& got, const Vector& want, DataType dtype, const std::string& what) {
  double norm = 0;
  for (double x : want) norm = std::max(norm, std::abs(x));
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO(what << " element " << i << " of " << want.size() << " (" << dtype_name(dtype) << ")");
    CHECK(std::abs(read_as_double(got, static_cast<std::int64_t>(i)) - want[i]) <= tolerance(dtype) * std::max(norm, 1.0));
  }
}

const DataType kFloating[] = {DataType::Float64, DataType::Float32, DataType::Float16, DataType::BFloat16};

// Every rank got the same bytes: rank 0's result broadcast and compared.
void check_same_on_every_rank(const std::shared_ptr<HostTensor>& t, const std::string& name) {
  if (t->size_bytes() == 0) return;  // an empty tensor has no data pointer
  auto copy = HostTensor::allocate(t->dtype(), t->shape());
  std::memcpy(copy->data(), t->data(), static_cast<std::size_t>(t->size_bytes()));
  broadcast_async(copy, copy, {0, name}).wait();
  CHECK(std::memcmp(copy->data(), t->data(), static_cast<std::size_t>(t->size_bytes())) == 0);
}

}  // namespace

TEST_CASE("Adasum: orthogonal vectors add up, parallel vectors average", "[adasum]") {
  const int rank = hvd::rank(), size = hvd::size();
  if (!power_of_two(size)) return;  // see the refusal below
  for (DataType dtype : kFloating) {
    const std::string d = dtype_name(dtype);
    // Orthogonal: rank r puts r + 1 at element r (and nothing elsewhere).
    auto ortho = filled(dtype, {size + 3}, [&](std::int64_t i) { return i == rank ? rank + 1.0 : 0.0; });
    allreduce_async(ortho, ortho, {ReduceOp::Adasum, "adasum.ortho." + d}).wait();
    Vector sum(static_cast<std::size_t>(size + 3), 0.0);
    for (int r = 0; r < size; ++r) sum[static_cast<std::size_t>(r)] = r + 1.0;
    check_close(*ortho, sum, dtype, "orthogonal");
    // Parallel: rank r sends (r + 1) v; the result is the mean, (size + 1) / 2 v.
    const Vector v = contribution(0, 0, 37);
    Vector mine(v.size()), mean(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) mine[i] = (rank + 1) * v[i], mean[i] = (size + 1) / 2.0 * v[i];
    auto parallel = tensor_of(dtype, mine);
    allreduce_async(parallel, parallel, {ReduceOp::Adasum, "adasum.parallel." + d}).wait();
    check_close(*parallel, rounded(dtype, mean), dtype, "parallel");
  }
}

TEST_CASE("Adasum: general vectors combine pairwise up the tree of ranks, fused tensors each on their own", "[adasum]") {
  const int rank = hvd::rank(), size = hvd::size();
  if (!power_of_two(size)) return;
  // Lengths below, at and above the number of ranks, odd ones, and an empty tensor: the halving
  // cuts through tensors at every level.
  const std::vector<std::int64_t> lengths = {1, 3, 0, static_cast<std::int64_t>(size), 17, 1000, 2};
  for (DataType dtype : kFloating) {
    const std::string d = dtype_name(dtype);
    std::vector<std::shared_ptr<HostTensor>> tensors;
    std::vector<Handle> handles;
    {
      SubmissionBatch batch;  // one fused response
      for (std::size_t k = 0; k < lengths.size(); ++k) {
        tensors.push_back(tensor_of(dtype, contribution(rank, static_cast<int>(k), lengths[k])));
        handles.push_back(allreduce_async(tensors.back(), tensors.back(),
                                          {ReduceOp::Adasum, "adasum.fused." + d + "." + std::to_string(k)}));
      }
    }
    for (auto& h : handles) h.wait();
    for (std::size_t k = 0; k < lengths.size(); ++k) {
      std::vector<Vector> inputs;
      for (int r = 0; r < size; ++r) inputs.push_back(rounded(dtype, contribution(r, static_cast<int>(k), lengths[k])));
      check_close(*tensors[k], adasum_tree(inputs), dtype, "tensor " + std::to_string(k));
      check_same_on_every_rank(tensors[k], "adasum.same." + d + "." + std::to_string(k));
    }
  }
}

TEST_CASE("Adasum: prescale before, postscale after, and out of place", "[adasum]") {
  const int rank = hvd::rank(), size = hvd::size();
  if (!power_of_two(size)) return;
  auto in = tensor_of(DataType::Float64, contribution(rank, 9, 50));
  auto out = HostTensor::allocate(DataType::Float64, {50});
  AllreduceOptions options{ReduceOp::Adasum, "adasum.scaled", 0.5, 3.0};
  allreduce_async(in, out, options).wait();
  std::vector<Vector> inputs;
  for (int r = 0; r < size; ++r) {
    Vector v = contribution(r, 9, 50);
    for (double& x : v) x *= 0.5;
    inputs.push_back(v);
  }
  Vector want = adasum_tree(inputs);
  for (double& x : want) x *= 3.0;
  check_close(*out, want, DataType::Float64, "scaled");
  check_close(*in, contribution(rank, 9, 50), DataType::Float64, "the input, untouched");
}

TEST_CASE("Adasum within a process set", "[adasum][sets]") {
  const int rank = hvd::rank(), size = hvd::size();
  if (size != 4) return;
  // {1, 3}: Adasum over its two ranks; {0, 1, 2}: three ranks, refused on each of them.
  ProcessSet pair = hvd::add_process_set({1, 3});
  ProcessSet three = hvd::add_process_set({0, 1, 2});
  if (pair.included()) {
    auto t = tensor_of(DataType::Float64, contribution(rank, 4, 21));
    allreduce_async(t, t, {ReduceOp::Adasum, "adasum.pair", 1.0, 1.0, pair}).wait();
    check_close(*t, adasum_combine(contribution(1, 4, 21), contribution(3, 4, 21)), DataType::Float64, "pair");
  }
  if (three.included()) {
    auto t = tensor_of(DataType::Float32, contribution(rank, 5, 8));
    try {
      allreduce_async(t, t, {ReduceOp::Adasum, "adasum.three", 1.0, 1.0, three}).wait();
      FAIL("Adasum on a process set of three ranks did not fail");
    } catch (const Error& e) {
      CHECK_THAT(e.what(), Catch::Contains("adasum.three") &&
                               Catch::Contains("Adasum needs a power-of-two number of ranks, and process set " +
                                               std::to_string(three.id()) + " has 3"));
    }
    check_close(*t, contribution(rank, 5, 8), DataType::Float32, "the refused tensor, untouched");
  }
  hvd::remove_process_set(three);
  hvd::remove_process_set(pair);
}

TEST_CASE("Adasum refusals name what was wrong, and the runtime goes on", "[adasum]") {
  const int rank = hvd::rank(), size = hvd::size();
  auto ints = filled(DataType::Int32, {4}, [](std::int64_t i) { return double(i); });
  CHECK_THROWS_WITH(allreduce_async(ints, ints, {ReduceOp::Adasum, "adasum.int32"}),
                    "allreduce of 'adasum.int32': Adasum reduces float16, bfloat16, float32 and float64 tensors, not int32");
  auto rows = filled(DataType::Float32, {size * 2}, [](std::int64_t i) { return double(i); });
  ReducescatterOptions rs;
  rs.op = ReduceOp::Adasum;
  rs.name = "adasum.rs";
  CHECK_THROWS_WITH(reducescatter_async(rows, host_allocator(), rs),
                    "reducescatter of 'adasum.rs': Adasum is an allreduce only; use Sum or Average here");
  if (!power_of_two(size)) {
    auto t = filled(DataType::Float64, {5}, [&](std::int64_t i) { return rank + i; });
    try {
      allreduce_async(t, t, {ReduceOp::Adasum, "adasum.three.ranks"}).wait();
      FAIL("Adasum on " << size << " ranks did not fail");
    } catch (const Error& e) {
      CHECK_THAT(e.what(), Catch::Contains("adasum.three.ranks") &&
                               Catch::Contains("Adasum needs a power-of-two number of ranks, and the job has " +
                                               std::to_string(size)));
    }
  }
  // The next operation works.
  auto t = filled(DataType::Float32, {3}, [&](std::int64_t) { return rank + 1.0; });
  allreduce_async(t, t, {ReduceOp::Sum, "adasum.after"}).wait();
  CHECK(read_as_double(*t, 2) == size * (size + 1) / 2.0);
}
