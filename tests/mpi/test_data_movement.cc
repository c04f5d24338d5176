// Allgather, broadcast, alltoall and reducescatter on host memory: every dtype (and every reduce
// op for reducescatter), uneven and empty shapes, against closed forms.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "closed_forms.h"

using namespace hvd;
using hvd::test::count_mismatches;
using hvd::test::filled;
using hvd::test::kEveryDtype;
using hvd::test::kEveryReduceOp;
using hvd::test::rank_value;
using hvd::test::reduced_over_ranks;
using hvd::test::read_as_double;

namespace {

std::shared_ptr<HostTensor> first_output(const Handle& h) {
  h.wait();
  return std::static_pointer_cast<HostTensor>(h.outputs().at(0));
}

std::string tag(const char* op, DataType dtype) { return std::string(op) + "." + dtype_name(dtype); }

}  // namespace

TEST_CASE("allgather: a different first dimension on every rank", "[allgather]") {
  const int rank = hvd::rank(), size = hvd::size();
  for (DataType dtype : kEveryDtype) {
    // Rank r has r rows (rank 0 none) of 3 columns; value = 10 * r + row + col.
    auto in = filled(dtype, {rank, 3}, [&](std::int64_t i) { return 10 * rank + i / 3 + i % 3; });
    auto out = first_output(allgather_async(in, host_allocator(), {tag("ag", dtype)}));
    const std::int64_t rows = size * (size - 1) / 2;
    REQUIRE(out->shape() == TensorShape{rows, 3});
    std::int64_t at = 0;
    for (int r = 0; r < size; ++r)
      for (int row = 0; row < r; ++row, ++at)
        for (int col = 0; col < 3; ++col) CHECK(read_as_double(*out, at * 3 + col) == 10 * r + row + col);
  }
}

TEST_CASE("allgather: every rank empty gives an empty result of the right shape", "[allgather]") {
  auto in = HostTensor::allocate(DataType::Float32, {0, 5});
  auto out = first_output(allgather_async(in, host_allocator(), {"ag.empty"}));
  CHECK(out->shape() == TensorShape{0, 5});
}

TEST_CASE("broadcast: every dtype from every root", "[broadcast]") {
  const int rank = hvd::rank(), size = hvd::size();
  for (int root = 0; root < size; ++root) {
    for (DataType dtype : kEveryDtype) {
      auto t = filled(dtype, {33}, [&](std::int64_t i) { return rank * 7 + i % 50; });
      broadcast_async(t, t, {root, "bcast." + std::to_string(root) + dtype_name(dtype)}).wait();
      INFO("root " << root << ", " << dtype_name(dtype));
      CHECK(count_mismatches(*t, [&](std::int64_t i) { return root * 7 + i % 50; }) == 0);
    }
  }
  auto empty = HostTensor::allocate(DataType::Int64, {0});
  REQUIRE_NOTHROW(broadcast_async(empty, empty, {size - 1, "bcast.empty"}).wait());
}

TEST_CASE("alltoall: every dtype with uneven splits, including empty ones", "[alltoall]") {
  const int rank = hvd::rank(), size = hvd::size();
  // Rank r sends (r + d) % 3 rows to rank d; each row is [r, d, row index].
  std::vector<std::int64_t> splits(size);
  std::int64_t rows = 0;
  for (int d = 0; d < size; ++d) rows += splits[d] = (rank + d) % 3;
  for (DataType dtype : kEveryDtype) {
    auto in = HostTensor::allocate(dtype, {rows, 3});
    std::int64_t at = 0;
    for (int d = 0; d < size; ++d)
      for (int j = 0; j < splits[d]; ++j, ++at) {
        hvd::test::write_from_double(*in, at * 3 + 0, rank);
        hvd::test::write_from_double(*in, at * 3 + 1, d);
        hvd::test::write_from_double(*in, at * 3 + 2, j);
      }
    auto h = alltoall_async(in, host_allocator(), {splits, tag("a2a", dtype)});
    auto out = first_output(h);
    const auto& received = h.received_splits();
    INFO(dtype_name(dtype));
    REQUIRE(received.size() == static_cast<std::size_t>(size));
    at = 0;
    for (int s = 0; s < size; ++s) {
      CHECK(received[s] == (s + rank) % 3);
      for (int j = 0; j < received[s]; ++j, ++at) {
        CHECK(read_as_double(*out, at * 3 + 0) == s);
        CHECK(read_as_double(*out, at * 3 + 1) == rank);
        CHECK(read_as_double(*out, at * 3 + 2) == j);
      }
    }
    CHECK(out->shape() == TensorShape{at, 3});
  }
}

TEST_CASE("alltoall: without splits the first dimension is divided evenly; nothing sent is empty", "[alltoall]") {
  const int rank = hvd::rank(), size = hvd::size();
  auto in = filled(DataType::Float32, {2 * size}, [&](std::int64_t i) { return rank * 100 + i; });
  auto out = first_output(alltoall_async(in, host_allocator(), {{}, "a2a.even"}));
  CHECK(count_mismatches(*out, [&](std::int64_t i) { return (i / 2) * 100 + 2 * rank + i % 2; }) == 0);

  auto none = HostTensor::allocate(DataType::Float64, {0, 2});
  auto h = alltoall_async(none, host_allocator(), {std::vector<std::int64_t>(size, 0), "a2a.empty"});
  CHECK(first_output(h)->shape() == TensorShape{0, 2});
  CHECK(h.received_splits() == std::vector<std::int64_t>(size, 0));
}

TEST_CASE("reducescatter: every dtype and reduce op; the first ranks get one extra row", "[reducescatter]") {
  const int rank = hvd::rank(), size = hvd::size();
  const std::int64_t cols = 3;
  for (std::int64_t rows : {std::int64_t{2} * size + 1, std::int64_t{size - 1}}) {  // more and fewer rows than ranks
    const std::int64_t mine = rows / size + (rank < rows % size ? 1 : 0);
    const std::int64_t first = rank * (rows / size) + std::min<std::int64_t>(rank, rows % size);
    for (DataType dtype : kEveryDtype) {
      for (ReduceOp op : kEveryReduceOp) {
        auto in = filled(dtype, {rows, cols}, [&](std::int64_t i) { return rank_value(rank, i, op); });
        const std::string name = "rs." + std::to_string(rows) + "." + dtype_name(dtype) + "." + reduce_op_name(op);
        auto out = first_output(reducescatter_async(in, host_allocator(), {op, name}));
        INFO(name);
        REQUIRE(out->shape() == TensorShape{mine, cols});
        CHECK(count_mismatches(*out, [&](std::int64_t i) {
                return reduced_over_ranks(op, first * cols + i, dtype, size);
              }) == 0);
      }
    }
  }
}

TEST_CASE("reducescatter: prescale and postscale", "[reducescatter]") {
  const int rank = hvd::rank(), size = hvd::size();
  const std::int64_t rows = size, cols = 2;
  auto in = filled(DataType::Float32, {rows, cols}, [&](std::int64_t i) { return (rank + 1) * (i + 1); });
  auto out = first_output(reducescatter_async(in, host_allocator(), {ReduceOp::Sum, "rs.scaled", 0.5, 4.0}));
  REQUIRE(out->shape() == TensorShape{1, cols});
  CHECK(count_mismatches(*out, [&](std::int64_t i) { return 2.0 * size * (size + 1) / 2.0 * (rank * cols + i + 1); }) == 0);
}
