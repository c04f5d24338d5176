// Integer allreduce and reducescatter near the limits of every integer dtype, against closed
// forms computed in 128 bits (tests/common/integer_limits.h, shared with the NCCL path's
// tests/gpu/test_nccl_integer_reductions.cc): Sum and Product wrap modulo 2^bits, Min and Max
// are exact, Average is the exact sum over ranks divided by the size, truncated toward zero
// (Note [Integer averages are exact], core/integer_average.h). Alone, fused with others, and above the size that MPI
// reduces in place; grouped; and reducescatter.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "test_support.h"
#include "tests/common/integer_limits.h"

using namespace hvd;

namespace {

template <class T>
T value(int r, std::int64_t i) {
  return test::limit_value<T>(r, i);
}

template <class T>
T expected(ReduceOp op, std::int64_t i, int size) {
  return test::limit_expected<T>(op, i, size);
}

template <class T>
std::shared_ptr<HostTensor> rank_tensor(DataType dtype, std::int64_t n, std::int64_t offset = 0) {
  auto t = HostTensor::allocate(dtype, {n});
  auto* p = t->template data_as<T>();
  for (std::int64_t i = 0; i < n; ++i) p[i] = value<T>(hvd::rank(), offset + i);
  return t;
}

template <class T>
int mismatches(const Tensor& t, ReduceOp op, std::int64_t offset = 0) {
  const T* p = static_cast<const T*>(const_cast<Tensor&>(t).data());
  int wrong = 0;
  for (std::int64_t i = 0; i < t.num_elements(); ++i) {
    const T want = expected<T>(op, offset + i, hvd::size());
    if (p[i] != want && wrong++ < 5)
      UNSCOPED_INFO("element " << i << ": got " << static_cast<long long>(p[i]) << ", expected "
                               << static_cast<long long>(want));
  }
  return wrong;
}

const ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Average, ReduceOp::Min, ReduceOp::Max, ReduceOp::Product};

template <class T>
void check_dtype(DataType dtype) {
  const std::string d = dtype_name(dtype);
  for (ReduceOp op : kOps) {
    const std::string o = reduce_op_name(op);
    INFO(d << " " << o);
    // Alone (in place), and fused: three tensors in one batch share the fusion buffer.
    auto alone = rank_tensor<T>(dtype, 40);
    allreduce_async(alone, alone, {op, "int.alone." + d + "." + o}).wait();
    CHECK(mismatches<T>(*alone, op) == 0);
    std::vector<std::shared_ptr<HostTensor>> fused;
    std::vector<Handle> handles;
    {
      SubmissionBatch batch;
      for (int k = 0; k < 3; ++k) {
        fused.push_back(rank_tensor<T>(dtype, 40, 40 * k));
        handles.push_back(allreduce_async(fused.back(), fused.back(), {op, "int.fused." + d + "." + o + "." + std::to_string(k)}));
      }
    }
    for (int k = 0; k < 3; ++k) {
      handles[k].wait();
      CHECK(mismatches<T>(*fused[k], op, 40 * k) == 0);
    }
  }
  // 1 MiB and more is reduced where it lies (MpiAllreduce::kDirectBytes), out of place here.
  const std::int64_t big = (std::int64_t{1} << 20) / static_cast<std::int64_t>(sizeof(T)) + 3;
  auto in = rank_tensor<T>(dtype, big);
  auto out = HostTensor::allocate(dtype, {big});
  allreduce_async(in, out, {ReduceOp::Average, "int.big." + d}).wait();
  CHECK(mismatches<T>(*out, ReduceOp::Average) == 0);
  // Grouped.
  auto g0 = rank_tensor<T>(dtype, 24), g1 = rank_tensor<T>(dtype, 24, 24);
  grouped_allreduce_async({g0, g1}, {g0, g1}, {ReduceOp::Average, "int.grouped." + d}).wait();
  CHECK(mismatches<T>(*g0, ReduceOp::Average) == 0);
  CHECK(mismatches<T>(*g1, ReduceOp::Average, 24) == 0);
}

template <class T>
void check_reducescatter(DataType dtype) {
  const int size = hvd::size(), rank = hvd::rank();
  const std::int64_t rows = 3 * size + 1;  // uneven: the first rank gets one row more
  for (ReduceOp op : {ReduceOp::Average, ReduceOp::Sum}) {
    auto t = rank_tensor<T>(dtype, rows * 2);
    t = [&] {
      auto shaped = HostTensor::allocate(dtype, {rows, 2});
      std::memcpy(shaped->data(), t->data(), t->size_bytes());
      return shaped;
    }();
    auto h = reducescatter_async(t, host_allocator(), {op, std::string("int.rs.") + dtype_name(dtype) + "." + reduce_op_name(op)});
    h.wait();
    const auto& out = *h.outputs().front();
    std::int64_t first_row = 0;
    for (int r = 0; r < rank; ++r) first_row += rows / size + (r < rows % size ? 1 : 0);
    INFO(dtype_name(dtype) << " reducescatter " << reduce_op_name(op));
    CHECK(out.shape().front() == rows / size + (rank < rows % size ? 1 : 0));
    CHECK(mismatches<T>(out, op, first_row * 2) == 0);
  }
}

}  // namespace

TEST_CASE("integer allreduce near the limits: Sum and Product wrap, Min and Max exact, Average exact and truncated",
          "[allreduce][integer]") {
  check_dtype<std::uint8_t>(DataType::UInt8);
  check_dtype<std::int8_t>(DataType::Int8);
  check_dtype<std::int16_t>(DataType::Int16);
  check_dtype<std::int32_t>(DataType::Int32);
  check_dtype<std::int64_t>(DataType::Int64);
}

TEST_CASE("integer Average as the issue reported it: truncated, and no low bit of int64 lost", "[allreduce][integer]") {
  const int rank = hvd::rank(), size = hvd::size();
  auto t = HostTensor::allocate(DataType::Int32, {4});
  const std::int32_t base[4] = {1, 2, 3, 7};
  for (int i = 0; i < 4; ++i) t->data_as<std::int32_t>()[i] = base[i] + rank;
  allreduce_async(t, t, {ReduceOp::Average, "int.issue.int32"}).wait();
  for (int i = 0; i < 4; ++i) CHECK(t->data_as<std::int32_t>()[i] == base[i] + (size - 1) / 2);  // sum r / size, truncated
  auto big = HostTensor::allocate(DataType::Int64, {2});
  big->data_as<std::int64_t>()[0] = (std::int64_t{1} << 60) + 1;
  big->data_as<std::int64_t>()[1] = std::numeric_limits<std::int64_t>::max() - rank;
  allreduce_async(big, big, {ReduceOp::Average, "int.issue.int64"}).wait();
  CHECK(big->data_as<std::int64_t>()[0] == (std::int64_t{1} << 60) + 1);
  // max - r averaged: max - (size - 1) / 2 as a fraction, truncated toward zero: max - size / 2.
  CHECK(big->data_as<std::int64_t>()[1] == std::numeric_limits<std::int64_t>::max() - size / 2);
}

TEST_CASE("integer Average with scale factors: whole factors are exact, others truncate",
          "[allreduce][integer]") {
  const int rank = hvd::rank(), size = hvd::size();
  auto t = HostTensor::allocate(DataType::Int64, {2});
  const std::int64_t base = (std::int64_t{1} << 61) + 5;
  t->data_as<std::int64_t>()[0] = base + rank;
  t->data_as<std::int64_t>()[1] = -7 - rank;
  allreduce_async(t, t, {ReduceOp::Average, "int.scaled.whole", 2.0, -1.0}).wait();
  // Whole factors multiply exactly: each value doubles, the average of 2 * (base + r) is
  // 2 * base + (size - 1), and -1 negates it.
  CHECK(t->data_as<std::int64_t>()[0] == -(2 * base + (size - 1)));
  std::int64_t sum1 = 0;
  for (int r = 0; r < size; ++r) sum1 += 2 * (-7 - r);
  CHECK(t->data_as<std::int64_t>()[1] == -(sum1 / size));
  // Other factors go through double and truncate toward zero: 0.5 of a negative average.
  auto small = HostTensor::allocate(DataType::Int32, {1});
  small->data_as<std::int32_t>()[0] = -7 - rank;
  allreduce_async(small, small, {ReduceOp::Average, "int.scaled.half", 1.0, 0.5}).wait();
  std::int32_t sum = 0;
  for (int r = 0; r < size; ++r) sum += -7 - r;
  CHECK(small->data_as<std::int32_t>()[0] == (sum / size) / 2);  // C++ '/' truncates, as the runtime does
}

TEST_CASE("integer reducescatter near the limits: Average exact and truncated, Sum wraps", "[reducescatter][integer]") {
  check_reducescatter<std::uint8_t>(DataType::UInt8);
  check_reducescatter<std::int8_t>(DataType::Int8);
  check_reducescatter<std::int16_t>(DataType::Int16);
  check_reducescatter<std::int32_t>(DataType::Int32);
  check_reducescatter<std::int64_t>(DataType::Int64);
}

// Open MPI's AVX reduction saturates 16-bit sums once a buffer takes its vector loop (np=2: 64
// elements of 30000 summed to 32767): the user-defined op of Note [8- and 16-bit sums wrap] must
// give the wrapped sum at every length, alone, fused and through the MPI_Reduce_scatter path.
TEST_CASE("int16 Sum and Product wrap at every length on the host path", "[allreduce][reducescatter][integer]") {
  const int rank = hvd::rank(), size = hvd::size();
  auto wrap16 = [](std::int64_t v) { return test::wrap<std::int16_t>(v); };
  std::int64_t sum = 0, product = 1;
  for (int r = 0; r < size; ++r) {
    sum += 30000 - r;
    product = wrap16(product * (181 + r));  // 181^2 passes 2^15
  }
  for (std::int64_t n : {std::int64_t{1}, std::int64_t{7}, std::int64_t{64}, std::int64_t{1000}, std::int64_t{300000}}) {
    INFO(n << " elements");
    auto s = HostTensor::allocate(DataType::Int16, {n});
    auto p = HostTensor::allocate(DataType::Int16, {n});
    for (std::int64_t i = 0; i < n; ++i) {
      s->data_as<std::int16_t>()[i] = static_cast<std::int16_t>(30000 - rank);
      p->data_as<std::int16_t>()[i] = static_cast<std::int16_t>(181 + rank);
    }
    Handle hs, hp;
    {
      SubmissionBatch batch;  // fused when they fit the fusion buffer
      hs = allreduce_async(s, s, {ReduceOp::Sum, "int16.wrap.sum." + std::to_string(n)});
      hp = allreduce_async(p, p, {ReduceOp::Product, "int16.wrap.product." + std::to_string(n)});
    }
    hs.wait();
    hp.wait();
    int wrong_sum = 0, wrong_product = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      wrong_sum += s->data_as<std::int16_t>()[i] != wrap16(sum);
      wrong_product += p->data_as<std::int16_t>()[i] != wrap16(product);
    }
    INFO("sum " << s->data_as<std::int16_t>()[n - 1] << " (want " << wrap16(sum) << "), product "
                << p->data_as<std::int16_t>()[n - 1] << " (want " << wrap16(product) << ")");
    CHECK(wrong_sum == 0);
    CHECK(wrong_product == 0);
  }
  // Reducescatter: 64 rows per rank.
  auto t = HostTensor::allocate(DataType::Int16, {64 * size, 1});
  for (std::int64_t i = 0; i < 64 * size; ++i) t->data_as<std::int16_t>()[i] = static_cast<std::int16_t>(30000 - rank);
  auto h = reducescatter_async(t, host_allocator(), {ReduceOp::Sum, "int16.wrap.rs"});
  h.wait();
  const auto& out = *h.outputs().front();
  REQUIRE(out.num_elements() == 64);
  int wrong = 0;
  for (std::int64_t i = 0; i < 64; ++i) wrong += static_cast<const std::int16_t*>(const_cast<Tensor&>(out).data())[i] != wrap16(sum);
  CHECK(wrong == 0);
}
