// Integer allreduce and reducescatter on device tensors near the limits of every integer dtype,
// against the same closed forms as the host path's test (tests/common/integer_limits.h): the
// NCCL path must give exactly what the MPI path gives (Note [Integer averages are exact]). Part
// of test_nccl_collectives (its main): emulated at np=1, 2 and 4, hierarchically as 2 nodes x 2
// ranks ([allreduce]), and through the MPI ops (HOROVOD_GPU_OPERATIONS=mpi).
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tests/common/integer_limits.h"
#include "tests/gpu/gpu_test_util.h"

using namespace hvd;
using hvd::test::DeviceTensor;

namespace {

// Device tensors hold the exact bits: DeviceTensor::upload/download go through double, which
// int64 values near the limits do not survive.
template <class T>
test::DeviceTensorPtr exact_tensor(DataType dtype, TensorShape shape, const std::vector<T>& values) {
  auto t = DeviceTensor::allocate(dtype, std::move(shape));
  test::check_cuda(cudaMemcpy(t->data(), values.data(), values.size() * sizeof(T), cudaMemcpyHostToDevice), "upload");
  return t;
}

template <class T>
std::vector<T> exact_values(Tensor& t) {
  std::vector<T> out(static_cast<std::size_t>(t.num_elements()));
  test::check_cuda(cudaMemcpy(out.data(), t.data(), out.size() * sizeof(T), cudaMemcpyDeviceToHost), "download");
  return out;
}

template <class T>
test::DeviceTensorPtr limit_tensor(DataType dtype, TensorShape shape, std::int64_t offset = 0) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  std::vector<T> values(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) values[i] = test::limit_value<T>(rank(), offset + i);
  return exact_tensor<T>(dtype, std::move(shape), values);
}

// Elements of `t` that differ from the closed form for elements offset.. of the rank values.
template <class T>
int mismatches(Tensor& t, ReduceOp op, std::int64_t offset = 0) {
  const std::vector<T> got = exact_values<T>(t);
  int wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const T want = test::limit_expected<T>(op, offset + static_cast<std::int64_t>(i), size());
    if (got[i] != want && wrong++ < 5)
      UNSCOPED_INFO("element " << i << " on rank " << rank() << ": got " << static_cast<long long>(got[i])
                               << ", expected " << static_cast<long long>(want));
  }
  return wrong;
}

const ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Average, ReduceOp::Min, ReduceOp::Max, ReduceOp::Product};

template <class T>
void check_allreduce(DataType dtype) {
  const std::string d = dtype_name(dtype);
  for (ReduceOp op : kOps) {
    const std::string o = reduce_op_name(op);
    INFO(d << " " << o);
    // Alone, out of place (the input stays as it was) and in place.
    auto in = limit_tensor<T>(dtype, {40});
    auto out = DeviceTensor::allocate(dtype, {40});
    allreduce_async(in, out, {op, "gpu.int.alone." + d + "." + o}).wait();
    CHECK(mismatches<T>(*out, op) == 0);
    CHECK(exact_values<T>(*in) == exact_values<T>(*limit_tensor<T>(dtype, {40})));
    allreduce_async(in, in, {op, "gpu.int.inplace." + d + "." + o}).wait();
    CHECK(mismatches<T>(*in, op) == 0);
    // Fused: three tensors of odd sizes share the device fusion buffer.
    std::vector<TensorPtr> fused;
    const std::int64_t counts[3] = {40, 7, 33};
    std::int64_t offset = 0;
    for (std::int64_t n : counts) {
      fused.push_back(limit_tensor<T>(dtype, {n}, offset));
      offset += n;
    }
    grouped_allreduce_async(fused, fused, {op, "gpu.int.fused." + d + "." + o}).wait();
    offset = 0;
    for (int k = 0; k < 3; ++k) {
      CHECK(mismatches<T>(*fused[k], op, offset) == 0);
      offset += counts[k];
    }
  }
}

template <class T>
void check_reducescatter(DataType dtype) {
  const int n = size(), me = rank();
  // Uneven rows (padded in the fusion buffer) and even rows (reduced from the input directly).
  for (std::int64_t rows : {std::int64_t{3} * n + 1, std::int64_t{2} * n}) {
    for (ReduceOp op : {ReduceOp::Average, ReduceOp::Sum, ReduceOp::Min}) {
      INFO(dtype_name(dtype) << " reducescatter " << reduce_op_name(op) << " of " << rows << " rows");
      auto t = limit_tensor<T>(dtype, {rows, 2});
      Handle h = reducescatter_async(t, test::device_allocator(),
                                     {op, std::string("gpu.int.rs.") + dtype_name(dtype) + "." + reduce_op_name(op) +
                                              "." + std::to_string(rows)});
      h.wait();
      auto& out = *h.outputs().front();
      const std::int64_t base = rows / n, extra = rows % n;
      const std::int64_t first_row = me * base + std::min<std::int64_t>(me, extra);
      REQUIRE(out.shape() == TensorShape{base + (me < extra ? 1 : 0), 2});
      CHECK(mismatches<T>(out, op, first_row * 2) == 0);
    }
  }
}

}  // namespace

TEST_CASE("NCCL integer allreduce near the limits: Sum and Product wrap, Min and Max exact, Average exact and truncated",
          "[allreduce][integer]") {
  check_allreduce<std::uint8_t>(DataType::UInt8);
  check_allreduce<std::int8_t>(DataType::Int8);
  check_allreduce<std::int16_t>(DataType::Int16);
  check_allreduce<std::int32_t>(DataType::Int32);
  check_allreduce<std::int64_t>(DataType::Int64);
}

TEST_CASE("NCCL integer Average as the issue reported it: truncated, and no low bit of int64 lost",
          "[allreduce][integer]") {
  const int me = rank(), n = size();
  const std::vector<std::int32_t> base = {1, 2, 3, 7};
  std::vector<std::int32_t> mine;
  for (auto b : base) mine.push_back(b + me);
  auto t = exact_tensor<std::int32_t>(DataType::Int32, {4}, mine);
  allreduce_async(t, t, {ReduceOp::Average, "gpu.int.issue.int32"}).wait();
  const auto got = exact_values<std::int32_t>(*t);
  for (int i = 0; i < 4; ++i) CHECK(got[i] == base[i] + (n - 1) / 2);  // sum of r / size, truncated
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  auto big = exact_tensor<std::int64_t>(DataType::Int64, {2}, {(std::int64_t{1} << 60) + 1, max - me});
  allreduce_async(big, big, {ReduceOp::Average, "gpu.int.issue.int64"}).wait();
  const auto b = exact_values<std::int64_t>(*big);
  CHECK(b[0] == (std::int64_t{1} << 60) + 1);
  CHECK(b[1] == max - n / 2);  // max - (n - 1) / 2 as a fraction, truncated toward zero
}

TEST_CASE("NCCL integer Average with scale factors: whole factors exact, others truncate, as on the host",
          "[allreduce][integer]") {
  const int me = rank(), n = size();
  const std::int64_t base = (std::int64_t{1} << 61) + 5;
  for (bool fused : {false, true}) {
    const std::string f = fused ? ".fused" : "";
    std::vector<TensorPtr> tensors = {exact_tensor<std::int64_t>(DataType::Int64, {2}, {base + me, -7 - me})};
    if (fused) tensors.push_back(exact_tensor<std::int64_t>(DataType::Int64, {1}, {base + me}));
    grouped_allreduce_async(tensors, tensors, {ReduceOp::Average, "gpu.int.scaled.whole" + f, 2.0, -1.0}).wait();
    // Each value doubles exactly; the average of 2 * (base + r) is 2 * base + (n - 1); -1 negates it.
    const auto t = exact_values<std::int64_t>(*tensors[0]);
    CHECK(t[0] == -(2 * base + (n - 1)));
    std::int64_t sum = 0;
    for (int r = 0; r < n; ++r) sum += 2 * (-7 - r);
    CHECK(t[1] == -(sum / n));
    if (fused) CHECK(exact_values<std::int64_t>(*tensors[1])[0] == -(2 * base + (n - 1)));
    // Other factors go through double and truncate toward zero: 0.5 of a negative average, and
    // a prescale of 1.5 clamped at the top of int32.
    std::vector<TensorPtr> small = {exact_tensor<std::int32_t>(DataType::Int32, {2}, {-7 - me, 2000000000})};
    if (fused) small.push_back(exact_tensor<std::int32_t>(DataType::Int32, {1}, {-7 - me}));
    grouped_allreduce_async(small, small, {ReduceOp::Average, "gpu.int.scaled.half" + f, 1.0, 0.5}).wait();
    std::int32_t s = 0;
    for (int r = 0; r < n; ++r) s += -7 - r;
    const auto h = exact_values<std::int32_t>(*small[0]);
    CHECK(h[0] == (s / n) / 2);  // C++ '/' truncates, as the runtime does
    CHECK(h[1] == 1000000000);
    std::vector<TensorPtr> clamped = {exact_tensor<std::int32_t>(DataType::Int32, {1}, {2000000000})};
    if (fused) clamped.push_back(exact_tensor<std::int32_t>(DataType::Int32, {1}, {-2000000000}));
    grouped_allreduce_async(clamped, clamped, {ReduceOp::Average, "gpu.int.scaled.clamp" + f, 1.5, 1.0}).wait();
    CHECK(exact_values<std::int32_t>(*clamped[0])[0] == std::numeric_limits<std::int32_t>::max());
    if (fused) CHECK(exact_values<std::int32_t>(*clamped[1])[0] == std::numeric_limits<std::int32_t>::min());
  }
}

TEST_CASE("NCCL integer reducescatter near the limits: Average exact and truncated, Sum wraps",
          "[reducescatter][integer]") {
  check_reducescatter<std::uint8_t>(DataType::UInt8);
  check_reducescatter<std::int8_t>(DataType::Int8);
  check_reducescatter<std::int16_t>(DataType::Int16);
  check_reducescatter<std::int32_t>(DataType::Int32);
  check_reducescatter<std::int64_t>(DataType::Int64);
}

TEST_CASE("a joined rank contributes zero words to an NCCL integer Average", "[allreduce][join][integer]") {
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  // Every rank's communicator exists before rank 0 joins.
  auto warm = exact_tensor<std::int64_t>(DataType::Int64, {1}, {1});
  allreduce_async(warm, warm, {ReduceOp::Sum, "gpu.int.join.warmup"}).wait();
  if (rank() == 0) {
    join();
    return;
  }
  // One tensor alone, then two fused; rank 0 adds zeros and counts in the size.
  std::vector<TensorPtr> t;
  for (int k = 0; k < 3; ++k) t.push_back(exact_tensor<std::int64_t>(DataType::Int64, {3}, {max, -max, rank()}));
  allreduce_async(t[0], t[0], {ReduceOp::Average, "gpu.int.join.single"}).wait();
  grouped_allreduce_async({t[1], t[2]}, {t[1], t[2]}, {ReduceOp::Average, "gpu.int.join.fused"}).wait();
  const int n = size();
  const __int128 top = static_cast<__int128>(max) * (n - 1);
  std::int64_t ranks = 0;
  for (int r = 1; r < n; ++r) ranks += r;
  for (auto& tensor : t) {
    const auto got = exact_values<std::int64_t>(*tensor);
    CHECK(got[0] == static_cast<std::int64_t>(top / n));
    CHECK(got[1] == static_cast<std::int64_t>(-top / n));
    CHECK(got[2] == ranks / n);
  }
  join();
}
