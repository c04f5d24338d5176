// Every collective x dtype x reduce op on host memory, against closed forms.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <thread>

#include "test_support.h"

using namespace hvd;
using hvd::test::filled;
using hvd::test::is_integer;
using hvd::test::kAllDtypes;
using hvd::test::read_as_double;

namespace {

int count_mismatches(const HostTensor& t, const std::function<double(std::int64_t)>& expected) {
  int wrong = 0;
  for (std::int64_t i = 0; i < t.num_elements(); ++i)
    if (read_as_double(t, i) != expected(i)) {
      if (wrong < 5)
        UNSCOPED_INFO("element " << i << ": got " << read_as_double(t, i) << ", expected " << expected(i));
      ++wrong;
    }
  return wrong;
}

// Values small enough to be exact in every dtype, including int8 and float16 sums at np=4.
double contribution(int rank, std::int64_t i) { return (rank + 1) * (i % 5 + 1); }

double expected_reduction(ReduceOp op, DataType dtype, int size, std::int64_t i) {
  const double k = i % 5 + 1;
  switch (op) {
    case ReduceOp::Sum: return size * (size + 1) / 2.0 * k;
    case ReduceOp::Average: {
      const double avg = (size + 1) / 2.0 * k;
      return is_integer(dtype) ? static_cast<double>(std::llround(avg)) : avg;
    }
    case ReduceOp::Min: return k;
    case ReduceOp::Max: return size * k;
    case ReduceOp::Product: return std::pow(2.0, size / 2);  // ranks contribute 1 or 2
  }
  return 0;
}

}  // namespace

TEST_CASE("allreduce: every dtype and reduce op matches the closed form", "[allreduce]") {
  const int rank = hvd::rank(), size = hvd::size();
  for (DataType dtype : kAllDtypes) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Average, ReduceOp::Min, ReduceOp::Max, ReduceOp::Product}) {
      for (std::int64_t n : {1, 17, 1000}) {
        auto input = filled(dtype, {n}, [&](std::int64_t i) {
          return op == ReduceOp::Product ? (rank % 2 + 1) : contribution(rank, i);
        });
        auto output = HostTensor::allocate(dtype, {n});
        const std::string name = std::string("ar.") + dtype_name(dtype) + "." + reduce_op_name(op) + "." + std::to_string(n);
        allreduce_async(input, output, {op, name}).wait();
        INFO(name);
        CHECK(count_mismatches(*output, [&](std::int64_t i) { return expected_reduction(op, dtype, size, i); }) == 0);
        // The input is left untouched by an out-of-place allreduce.
        CHECK(read_as_double(*input, 0) == (op == ReduceOp::Product ? rank % 2 + 1 : contribution(rank, 0)));
      }
    }
  }
}

TEST_CASE("allreduce: in place, prescale and postscale", "[allreduce]") {
  const int rank = hvd::rank(), size = hvd::size();
  auto t = filled(DataType::Float32, {6, 7}, [&](std::int64_t i) { return contribution(rank, i); });
  allreduce_async(t, t, {ReduceOp::Sum, "scaled", 0.5, 3.0}).wait();
  CHECK(count_mismatches(*t, [&](std::int64_t i) { return 1.5 * expected_reduction(ReduceOp::Sum, DataType::Float32, size, i); }) == 0);
  auto avg = filled(DataType::Float64, {5}, [&](std::int64_t i) { return contribution(rank, i); });
  allreduce_async(avg, avg, {ReduceOp::Average, "scaled.average", 2.0, 1.0}).wait();
  CHECK(count_mismatches(*avg, [&](std::int64_t i) { return 2.0 * expected_reduction(ReduceOp::Average, DataType::Float64, size, i); }) == 0);
}

TEST_CASE("allreduce: many tensors at once are fused and each gets its own result", "[allreduce][fusion]") {
  const int rank = hvd::rank(), size = hvd::size();
  std::vector<std::shared_ptr<HostTensor>> tensors;
  std::vector<Handle> handles;
  for (int k = 0; k < 40; ++k) {
    tensors.push_back(filled(DataType::Float32, {k + 1}, [&](std::int64_t i) { return (rank + 1) * (k + i); }));
    handles.push_back(allreduce_async(tensors.back(), tensors.back(), {ReduceOp::Sum, "fuse." + std::to_string(k)}));
  }
  for (auto& h : handles) h.wait();
  for (int k = 0; k < 40; ++k) {
    INFO("tensor fuse." << k);
    CHECK(count_mismatches(*tensors[k], [&](std::int64_t i) { return size * (size + 1) / 2.0 * (k + i); }) == 0);
  }
}

TEST_CASE("allreduce: empty tensors and odd sizes", "[allreduce]") {
  const int rank = hvd::rank(), size = hvd::size();
  auto empty = HostTensor::allocate(DataType::Float32, {0, 3});
  allreduce_async(empty, empty, {ReduceOp::Sum, "empty"}).wait();
  CHECK(empty->num_elements() == 0);
  for (std::int64_t n : {3, 127, 1023, 65537}) {
    auto t = filled(DataType::Int64, {n}, [&](std::int64_t i) { return (rank + 1) * i; });
    allreduce_async(t, t, {ReduceOp::Sum, "odd." + std::to_string(n)}).wait();
    CHECK(count_mismatches(*t, [&](std::int64_t i) { return size * (size + 1) / 2.0 * i; }) == 0);
  }
}

TEST_CASE("grouped allreduce returns every member reduced", "[allreduce][group]") {
  const int rank = hvd::rank(), size = hvd::size();
  std::vector<TensorPtr> ins, outs;
  for (int k = 0; k < 5; ++k) {
    ins.push_back(filled(DataType::Float64, {k + 2}, [&](std::int64_t i) { return rank * 10.0 + k + i; }));
    outs.push_back(HostTensor::allocate(DataType::Float64, {k + 2}));
  }
  grouped_allreduce_async(ins, outs, {ReduceOp::Average, "group"}).wait();
  for (int k = 0; k < 5; ++k)
    CHECK(count_mismatches(*std::static_pointer_cast<HostTensor>(outs[k]),
                           [&](std::int64_t i) { return (size - 1) * 10.0 / 2 + k + i; }) == 0);
}

TEST_CASE("allgather: a different first dimension on every rank", "[allgather]") {
  const int rank = hvd::rank(), size = hvd::size();
  for (DataType dtype : kAllDtypes) {
    // Rank r has r rows (rank 0 none) of 3 columns; value = 10 * r + row + col.
    auto in = filled(dtype, {rank, 3}, [&](std::int64_t i) { return 10 * rank + i / 3 + i % 3; });
    auto h = allgather_async(in, host_allocator(), {std::string("ag.") + dtype_name(dtype)});
    h.wait();
    auto out = std::static_pointer_cast<HostTensor>(h.outputs().at(0));
    const std::int64_t rows = size * (size - 1) / 2;
    REQUIRE(out->shape() == TensorShape{rows, 3});
    std::int64_t at = 0;
    for (int r = 0; r < size; ++r)
      for (int row = 0; row < r; ++row, ++at)
        for (int col = 0; col < 3; ++col) CHECK(read_as_double(*out, at * 3 + col) == 10 * r + row + col);
  }
}

TEST_CASE("broadcast from every root", "[broadcast]") {
  const int rank = hvd::rank(), size = hvd::size();
  for (int root = 0; root < size; ++root) {
    for (DataType dtype : {DataType::UInt8, DataType::Float16, DataType::Float64}) {
      auto t = filled(dtype, {33}, [&](std::int64_t i) { return rank * 7 + i % 50; });
      broadcast_async(t, t, {root, "bcast." + std::to_string(root) + dtype_name(dtype)}).wait();
      CHECK(count_mismatches(*t, [&](std::int64_t i) { return root * 7 + i % 50; }) == 0);
    }
  }
}

TEST_CASE("alltoall with uneven splits, including empty ones", "[alltoall]") {
  const int rank = hvd::rank(), size = hvd::size();
  // Rank r sends (r + d) % 3 rows to rank d; each row is [r, d, row index].
  std::vector<std::int64_t> splits(size);
  std::int64_t rows = 0;
  for (int d = 0; d < size; ++d) rows += splits[d] = (rank + d) % 3;
  auto in = HostTensor::allocate(DataType::Int32, {rows, 3});
  std::int64_t at = 0;
  for (int d = 0; d < size; ++d)
    for (int j = 0; j < splits[d]; ++j, ++at) {
      in->data_as<std::int32_t>()[at * 3 + 0] = rank;
      in->data_as<std::int32_t>()[at * 3 + 1] = d;
      in->data_as<std::int32_t>()[at * 3 + 2] = j;
    }
  auto h = alltoall_async(in, host_allocator(), {splits, "a2a"});
  h.wait();
  auto out = std::static_pointer_cast<HostTensor>(h.outputs().at(0));
  const auto& received = h.received_splits();
  REQUIRE(received.size() == static_cast<std::size_t>(size));
  at = 0;
  for (int s = 0; s < size; ++s) {
    CHECK(received[s] == (s + rank) % 3);
    for (int j = 0; j < received[s]; ++j, ++at) {
      CHECK(out->data_as<std::int32_t>()[at * 3 + 0] == s);
      CHECK(out->data_as<std::int32_t>()[at * 3 + 1] == rank);
      CHECK(out->data_as<std::int32_t>()[at * 3 + 2] == j);
    }
  }
  CHECK(out->shape()[0] == at);
}

TEST_CASE("alltoall without splits divides the first dimension evenly", "[alltoall]") {
  const int rank = hvd::rank(), size = hvd::size();
  auto in = filled(DataType::Float32, {2 * size}, [&](std::int64_t i) { return rank * 100 + i; });
  auto h = alltoall_async(in, host_allocator(), {{}, "a2a.even"});
  h.wait();
  auto out = std::static_pointer_cast<HostTensor>(h.outputs().at(0));
  CHECK(count_mismatches(*out, [&](std::int64_t i) { return (i / 2) * 100 + 2 * rank + i % 2; }) == 0);
}

TEST_CASE("reducescatter gives the first ranks one extra row when rows do not divide", "[reducescatter]") {
  const int rank = hvd::rank(), size = hvd::size();
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Average, ReduceOp::Max}) {
    const std::int64_t rows = 2 * size + 1, cols = 4;
    auto in = filled(DataType::Float32, {rows, cols}, [&](std::int64_t i) { return (rank + 1) * (i + 1); });
    auto h = reducescatter_async(in, host_allocator(), {op, std::string("rs.") + reduce_op_name(op)});
    h.wait();
    auto out = std::static_pointer_cast<HostTensor>(h.outputs().at(0));
    const std::int64_t mine = rows / size + (rank < rows % size ? 1 : 0);
    const std::int64_t first = rank * (rows / size) + std::min<std::int64_t>(rank, rows % size);
    REQUIRE(out->shape() == TensorShape{mine, cols});
    const double factor = op == ReduceOp::Sum ? size * (size + 1) / 2.0 : op == ReduceOp::Average ? (size + 1) / 2.0 : size;
    CHECK(count_mismatches(*out, [&](std::int64_t i) { return factor * (first * cols + i + 1); }) == 0);
  }
}

TEST_CASE("handles from several user threads at once", "[threads]") {
  const int rank = hvd::rank(), size = hvd::size();
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int k = 0; k < 25; ++k) {
        auto x = filled(DataType::Float32, {16}, [&](std::int64_t i) { return (rank + 1) * (t + k + i); });
        allreduce_async(x, x, {ReduceOp::Sum, "thread" + std::to_string(t) + "." + std::to_string(k)}).wait();
        for (std::int64_t i = 0; i < 16; ++i)
          if (read_as_double(*x, i) != size * (size + 1) / 2.0 * (t + k + i)) ++wrong[t];
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) CHECK(wrong[t] == 0);
}

TEST_CASE("barrier holds every rank until the slowest arrives", "[barrier]") {
  const auto start = std::chrono::steady_clock::now();
  if (hvd::rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  hvd::barrier();
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK(waited >= std::chrono::milliseconds(250));
}

TEST_CASE("join: ranks with fewer steps join and contribute zeros", "[join]") {
  const int rank = hvd::rank(), size = hvd::size();
  const int my_steps = 2 * (rank + 1);
  for (int step = 0; step < my_steps; ++step) {
    auto g = filled(DataType::Float32, {4}, [&](std::int64_t i) { return (rank + 1) * (i + 1); });
    allreduce_async(g, g, {ReduceOp::Sum, "join.grad"}).wait();
    // Ranks still stepping at this step are those with 2 * (r + 1) > step.
    double active = 0;
    for (int r = 0; r < size; ++r)
      if (2 * (r + 1) > step) active += r + 1;
    CHECK(count_mismatches(*g, [&](std::int64_t i) { return active * (i + 1); }) == 0);
  }
  const int last = hvd::join();
  CHECK(last == size - 1);
  // Everything works normally after the join completes.
  auto after = filled(DataType::Float32, {2}, [&](std::int64_t) { return 1; });
  allreduce_async(after, after, {ReduceOp::Sum, "after.join"}).wait();
  CHECK(read_as_double(*after, 1) == size);
}

TEST_CASE("names may be omitted when every rank calls in the same order", "[names]") {
  const int size = hvd::size();
  for (int k = 0; k < 3; ++k) {
    auto t = filled(DataType::Int32, {3}, [&](std::int64_t) { return 1; });
    allreduce_async(t, t, {ReduceOp::Sum, ""}).wait();
    CHECK(read_as_double(*t, 2) == size);
  }
}

TEST_CASE("topology: local ranks share the node, cross ranks span nodes", "[topology]") {
  CHECK(hvd::local_rank() == hvd::rank() % hvd::local_size());
  CHECK(hvd::local_size() * hvd::cross_size() == hvd::size());
  auto t = filled(DataType::Int32, {1}, [&](std::int64_t) { return hvd::local_rank() == 0 ? 1 : 0; });
  allreduce_async(t, t, {ReduceOp::Sum, "topology.nodes"}).wait();
  CHECK(read_as_double(*t, 0) == hvd::cross_size());
}
