// GPU tests of the NCCL backend: every collective and dtype against a closed form, fused and
// unfused, on device tensors; readiness ordering (the op must wait for the producer's event, and
// for the allocation of outputs taken from a stream-ordered pool); a joined rank; errors every
// rank sees alike. Run under mpirun on a GPU (np=1, and np=2 where ranks may share it; without a
// device each rank exits with the ctest skip code), and in CI on the emulated CUDA runtime and
// NCCL at np=1, 2 and 4 (test_nccl_collectives_emulated; see tests/gpu/CMakeLists.txt).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "tests/common/adasum_reference.h"
#include "tests/common/fake_placement.h"
#include "tests/common/rank_reduction.h"
#include "tests/common/every_rank_session.h"
#include "tests/gpu/gpu_test_util.h"

using namespace hvd;
using hvd::test::DeviceTensor;
using hvd::test::rank_value;
using hvd::test::tolerance;

namespace {

// The closed form stored in the dtype, as the runtime stores its result.
double expected(ReduceOp op, std::int64_t i, DataType dtype, double prescale = 1, double postscale = 1) {
  return test::round_trip(test::reduced_over_ranks(op, i, dtype, size(), prescale, postscale), dtype);
}

void check_close(const std::vector<double>& got, const std::vector<double>& want, DataType dtype,
                 const std::string& what) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO(what << " element " << i << " on rank " << rank());
    REQUIRE(std::fabs(got[i] - want[i]) <= tolerance(dtype) * std::max(1.0, std::fabs(want[i])));
  }
}

test::DeviceTensorPtr device_tensor(DataType dtype, TensorShape shape, const std::vector<double>& values) {
  auto t = DeviceTensor::allocate(dtype, std::move(shape));
  t->upload(values);
  return t;
}

std::string label(const char* op, DataType dtype, ReduceOp reduce, std::int64_t n) {
  return std::string(op) + "." + dtype_name(dtype) + "." + reduce_op_name(reduce) + "." + std::to_string(n);
}

// How this job reduces device Adasum (Note [Adasum of device tensors averages within the node]):
// NcclAdasum averages each node's `group` ranks first (test::ranks_of_node), unless
// HOROVOD_GPU_OPERATIONS=mpi or one rank per node stages every rank as a participant. On several
// nodes with a power-of-two local size it works on one chunk per local rank (Note [Adasum of a
// node's chunk]).
struct AdasumPath {
  bool gpu_mpi;       // HOROVOD_GPU_OPERATIONS=mpi
  bool on_nccl;       // NcclAdasum, else the staged op
  int group;          // ranks averaged before Adasum
  int participants;   // what Adasum combines: nodes, or ranks when staged
  bool chunked;       // NcclAdasum's reduce-scatter, chunk Adasum, allgather
};

AdasumPath adasum_path() {
  const char* operations = std::getenv("HOROVOD_GPU_OPERATIONS");
  const bool gpu_mpi = operations != nullptr && std::string(operations) == "mpi";
  const bool on_nccl = !gpu_mpi && local_size() > 1;
  const int group = on_nccl ? local_size() : 1;
  const bool chunked = on_nccl && cross_size() > 1 && test::power_of_two(local_size());
  return {gpu_mpi, on_nccl, group, size() / group, chunked};
}

}  // namespace

TEST_CASE("NCCL allreduce of every dtype and op, one tensor at a time", "[allreduce]") {
  for (DataType dtype : test::kEveryDtype) {
    for (ReduceOp op : test::kEveryReduceOp) {
      for (std::int64_t n : {1, 33, 1000}) {
        std::vector<double> in(n);
        for (std::int64_t i = 0; i < n; ++i) in[i] = rank_value(rank(), i, op);
        auto input = device_tensor(dtype, {n}, in);
        auto output = DeviceTensor::allocate(dtype, {n});
        const std::string name = label("allreduce", dtype, op, n);
        allreduce_async(input, output, {op, name}).wait();
        std::vector<double> want(n);
        for (std::int64_t i = 0; i < n; ++i) want[i] = expected(op, i, dtype);
        check_close(output->download(), want, dtype, name);
        check_close(input->download(), in, dtype, name + " (input untouched)");
      }
    }
  }
}

TEST_CASE("NCCL allreduce in place", "[allreduce]") {
  const std::int64_t n = 257;
  std::vector<double> in(n), want(n);
  for (std::int64_t i = 0; i < n; ++i) {
    in[i] = rank_value(rank(), i, ReduceOp::Sum);
    want[i] = expected(ReduceOp::Sum, i, DataType::Float32);
  }
  auto t = device_tensor(DataType::Float32, {n}, in);
  allreduce_async(t, t, {ReduceOp::Sum, "inplace"}).wait();
  check_close(t->download(), want, DataType::Float32, "in place");
}

TEST_CASE("NCCL allreduce fused through the device fusion buffer", "[allreduce]") {
  const std::vector<std::int64_t> counts = {1, 3, 17, 1000, 5, 64};
  for (DataType dtype : test::kEveryDtype) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Average, ReduceOp::Max, ReduceOp::Product}) {
      std::vector<TensorPtr> inputs, outputs;
      for (auto n : counts) {
        std::vector<double> in(n);
        for (std::int64_t i = 0; i < n; ++i) in[i] = rank_value(rank(), i, op) ;
        inputs.push_back(device_tensor(dtype, {n}, in));
        outputs.push_back(DeviceTensor::allocate(dtype, {n}));
      }
      const std::string name = label("grouped", dtype, op, 0);
      grouped_allreduce_async(inputs, outputs, {op, name}).wait();
      for (std::size_t t = 0; t < counts.size(); ++t) {
        std::vector<double> want(counts[t]);
        for (std::int64_t i = 0; i < counts[t]; ++i) want[i] = expected(op, i, dtype);
        check_close(static_cast<DeviceTensor&>(*outputs[t]).download(), want, dtype,
                    name + " tensor " + std::to_string(t));
      }
    }
  }
}

TEST_CASE("NCCL allreduce applies prescale and postscale on the device", "[allreduce]") {
  for (DataType dtype : {DataType::Float16, DataType::BFloat16, DataType::Float32, DataType::Float64}) {
    for (bool fused : {false, true}) {
      const std::int64_t n = 100;
      std::vector<TensorPtr> inputs, outputs;
      const int tensors = fused ? 3 : 1;
      for (int t = 0; t < tensors; ++t) {
        std::vector<double> in(n);
        for (std::int64_t i = 0; i < n; ++i) in[i] = rank_value(rank(), i, ReduceOp::Sum);
        inputs.push_back(device_tensor(dtype, {n}, in));
        outputs.push_back(DeviceTensor::allocate(dtype, {n}));
      }
      AllreduceOptions options{ReduceOp::Average, label("scaled", dtype, ReduceOp::Average, fused), 0.5, 4.0};
      grouped_allreduce_async(inputs, outputs, options).wait();
      std::vector<double> want(n);
      for (std::int64_t i = 0; i < n; ++i) want[i] = expected(ReduceOp::Average, i, dtype, 0.5, 4.0);
      for (auto& out : outputs)
        check_close(static_cast<DeviceTensor&>(*out).download(), want, dtype, options.name);
    }
  }
}

// What int16's trip through int64 words must keep (Note [int16 reduces through int64 words on
// NCCL]): sums that pass 2^15 wrap as int16 arithmetic does, Average truncates the exact sum
// toward zero (negative values included), and the scale factors apply as int16 scaling, each
// truncated. The host path (HOROVOD_GPU_OPERATIONS=mpi) must give the same.
TEST_CASE("int16 on device tensors: wrapping sums, truncated averages, scale factors",
          "[allreduce][reducescatter]") {
  const int me = rank(), n = size();
  const std::int64_t count = 6;
  auto value = [](int r, std::int64_t i) -> std::int64_t {
    switch (i % 3) {
      case 0: return 20000 + r;          // the sum passes 2^15 from two ranks on
      case 1: return r == 0 ? -7 : 2 * r;  // a negative sum or a small one, rarely a multiple of n
      default: return -(r + 1) * 3 - static_cast<std::int64_t>(i);
    }
  };
  auto wrap = [](std::int64_t v) { return static_cast<double>(static_cast<std::int16_t>(static_cast<std::uint16_t>(v))); };
  struct Case {
    ReduceOp op;
    double prescale, postscale;
  };
  for (const Case& c : {Case{ReduceOp::Sum, 1, 1}, Case{ReduceOp::Average, 1, 1}, Case{ReduceOp::Average, 0.5, 1.5},
                        Case{ReduceOp::Sum, 1, 0.5}}) {
    std::vector<double> in(count), want(count);
    for (std::int64_t i = 0; i < count; ++i) {
      in[i] = static_cast<double>(value(me, i));
      std::int64_t acc = 0;
      for (int r = 0; r < n; ++r) acc += static_cast<std::int64_t>(std::trunc(value(r, i) * c.prescale));
      if (c.op == ReduceOp::Average) acc /= n;  // C++ division truncates toward zero
      want[i] = std::trunc(wrap(acc) * c.postscale);
    }
    const std::string name = std::string("int16.") + reduce_op_name(c.op) + "." + std::to_string(c.prescale) + "." +
                             std::to_string(c.postscale);
    AllreduceOptions options{c.op, name, c.prescale, c.postscale};
    auto input = device_tensor(DataType::Int16, {count}, in);
    auto output = DeviceTensor::allocate(DataType::Int16, {count});
    allreduce_async(input, output, options).wait();
    check_close(output->download(), want, DataType::Int16, name);
    // The same values scattered: rows of one element, this rank's rows of the same results.
    std::vector<double> rows_in(count * n), rows_want(count * n);
    for (std::int64_t j = 0; j < count * n; ++j) {
      rows_in[j] = in[j % count];
      rows_want[j] = want[j % count];
    }
    auto scattered_in = device_tensor(DataType::Int16, {count * n, 1}, rows_in);
    Handle h = reducescatter_async(scattered_in, test::device_allocator(),
                                   {c.op, name + ".scattered", c.prescale, c.postscale});
    h.wait();
    auto& out = static_cast<DeviceTensor&>(*h.outputs().at(0));
    REQUIRE(out.shape() == TensorShape{count, 1});
    std::vector<double> mine(rows_want.begin() + me * count, rows_want.begin() + (me + 1) * count);
    check_close(out.download(), mine, DataType::Int16, name + ".scattered");
  }
}

TEST_CASE("Adasum of device tensors: the node's average, then Adasum across the nodes, as Horovod with NCCL",
          "[allreduce][adasum]") {
  // Orthogonal vectors: the nodes' averages are orthogonal too, so their Adasum is their sum, the
  // ranks' sum over the local size; with HOROVOD_GPU_OPERATIONS=mpi, Adasum over every rank: the
  // sum. Parallel vectors: the mean either way. Both scale with prescale * postscale. See Note
  // [Adasum of device tensors averages within the node]; the timeline shows which op ran. With
  // HOROVOD_GPU_OPERATIONS=nccl the same as unset.
  const int size = hvd::size(), me = rank();
  const auto [gpu_mpi, on_nccl, group, participants, chunked] = adasum_path();
  const double denominator = group;
  const std::string path = "adasum_timeline_np" + std::to_string(size) + "_local" + std::to_string(local_size()) +
                           (gpu_mpi ? "_mpi" : "") + (std::getenv("HOROVOD_HIERARCHICAL_ALLREDUCE") ? "_h" : "") +
                           ".json";
  // Adasum pairs its participants: a number that is not a power of two fails on every rank,
  // naming the tensors, and the job goes on.
  if (!test::power_of_two(participants)) {
    auto t = device_tensor(DataType::Float32, {5}, std::vector<double>(5, me + 1.0));
    try {
      allreduce_async(t, t, {ReduceOp::Adasum, "adasum.refused"}).wait();
      FAIL("Adasum over " << participants << " participants reduced");
    } catch (const Error& e) {
      const std::string message = e.what();
      INFO(message);
      REQUIRE(message.find("adasum.refused") != std::string::npos);
      REQUIRE(message.find("power-of-two") != std::string::npos);
    }
    auto ok = device_tensor(DataType::Float32, {4}, std::vector<double>(4, 1.0));
    allreduce_async(ok, ok, {ReduceOp::Sum, "adasum.refused.after"}).wait();
    check_close(ok->download(), std::vector<double>(4, size), DataType::Float32, "after the refused Adasum");
    return;
  }
  start_timeline(path);
  for (DataType dtype : {DataType::Float32, DataType::Float64, DataType::Float16, DataType::BFloat16}) {
    const double scale = dtype == DataType::Float32 ? 0.5 * 4.0 : 1.0;
    AllreduceOptions options{ReduceOp::Adasum, std::string("adasum.") + dtype_name(dtype)};
    if (dtype == DataType::Float32) options.prescale_factor = 0.5, options.postscale_factor = 4.0;
    // Fused: tensors of different sizes. Then the parallel one alone.
    const std::int64_t n = size + 5, m = n + 3;
    std::vector<double> ortho(n, 0.0), sum(n, 0.0), parallel(m), mean(m);
    ortho[me] = me + 1.0;
    for (int r = 0; r < size; ++r) sum[r] = (r + 1.0) / denominator * scale;
    for (std::int64_t i = 0; i < m; ++i)
      parallel[i] = (me + 1) * (i % 4 + 1.0), mean[i] = (size + 1) / 2.0 * (i % 4 + 1.0) * scale;
    std::vector<TensorPtr> inputs = {device_tensor(dtype, {n}, ortho), device_tensor(dtype, {m}, parallel)};
    std::vector<TensorPtr> outputs = {DeviceTensor::allocate(dtype, {n}), DeviceTensor::allocate(dtype, {m})};
    grouped_allreduce_async(inputs, outputs, options).wait();
    check_close(static_cast<DeviceTensor&>(*outputs[0]).download(), sum, dtype, options.name + " orthogonal");
    check_close(static_cast<DeviceTensor&>(*outputs[1]).download(), mean, dtype, options.name + " parallel");
    auto alone = DeviceTensor::allocate(dtype, {m});
    options.name += ".alone";
    allreduce_async(inputs[1], alone, options).wait();
    check_close(alone->download(), mean, dtype, options.name);
  }
  stop_timeline();
  if (me == 0) {  // only rank 0 records
    std::ifstream file(path);
    std::stringstream text;
    text << file.rdbuf();
    const std::string trace = text.str();
    INFO(path);
    REQUIRE((trace.find("NCCL_ADASUM_NODE_AVERAGE") != std::string::npos) == (on_nccl && !chunked));
    REQUIRE((trace.find("NCCL_REDUCESCATTER") != std::string::npos) == chunked);
    REQUIRE((trace.find("NCCL_ALLGATHER") != std::string::npos) == chunked);
    // The whole vector across the nodes: local rank 0's result broadcast to the node.
    REQUIRE((trace.find("NCCL_BROADCAST") != std::string::npos) == (on_nccl && !chunked && cross_size() > 1));
    // Staging (StagedMpiOp) copies every input to the host, the chunked NcclAdasum its chunk; on
    // one node NcclAdasum never copies.
    REQUIRE((trace.find("MEMCPY_DEVICE_TO_HOST") != std::string::npos) == (!on_nccl || chunked));
    REQUIRE((trace.find("MPI_ADASUM_ALLREDUCE") != std::string::npos) == (!on_nccl || cross_size() > 1));
    std::remove(path.c_str());
  }
}

TEST_CASE("NCCL allgather with a different first dimension on each rank", "[allgather]") {
  const std::int64_t cols = 3;
  for (DataType dtype : test::kEveryDtype) {
    const std::int64_t rows = rank() + 1;
    std::vector<double> in(rows * cols);
    for (std::int64_t i = 0; i < rows * cols; ++i) in[i] = (rank() + 1) * 10 + i % 7;
    auto input = device_tensor(dtype, {rows, cols}, in);
    Handle h = allgather_async(input, test::device_allocator(), {std::string("allgather.") + dtype_name(dtype)});
    h.wait();
    auto& out = static_cast<DeviceTensor&>(*h.outputs().at(0));
    const std::int64_t total_rows = static_cast<std::int64_t>(size()) * (size() + 1) / 2;
    REQUIRE(out.shape() == TensorShape{total_rows, cols});
    std::vector<double> want;
    for (int r = 0; r < size(); ++r)
      for (std::int64_t i = 0; i < (r + 1) * cols; ++i) want.push_back((r + 1) * 10 + i % 7);
    check_close(out.download(), want, dtype, std::string("allgather.") + dtype_name(dtype));
  }
}

TEST_CASE("NCCL broadcast from the last rank", "[broadcast]") {
  const int root = size() - 1;
  for (DataType dtype : test::kEveryDtype) {
    const std::int64_t n = 77;
    std::vector<double> in(n), want(n);
    for (std::int64_t i = 0; i < n; ++i) {
      in[i] = rank_value(rank(), i, ReduceOp::Sum);
      want[i] = rank_value(root, i, ReduceOp::Sum);
    }
    auto t = device_tensor(dtype, {n}, in);
    broadcast_async(t, t, {root, std::string("broadcast.") + dtype_name(dtype)}).wait();
    check_close(t->download(), want, dtype, std::string("broadcast.") + dtype_name(dtype));
  }
}

TEST_CASE("NCCL alltoall with uneven splits", "[alltoall]") {
  const int me = rank(), n = size();
  auto rows = [](int from, int to) { return static_cast<std::int64_t>((from + to) % 3 + 1); };
  auto cell = [](int from, int to, std::int64_t j) { return 20.0 * from + 5 * to + j % 5; };
  const std::int64_t cols = 2;
  for (DataType dtype : {DataType::Int8, DataType::Float16, DataType::Float32, DataType::Int64}) {
    std::vector<std::int64_t> splits;
    std::vector<double> in;
    for (int p = 0; p < n; ++p) {
      splits.push_back(rows(me, p));
      for (std::int64_t j = 0; j < rows(me, p) * cols; ++j) in.push_back(cell(me, p, j));
    }
    auto input = device_tensor(dtype, {static_cast<std::int64_t>(in.size()) / cols, cols}, in);
    Handle h = alltoall_async(input, test::device_allocator(), {splits, std::string("alltoall.") + dtype_name(dtype)});
    h.wait();
    std::vector<double> want;
    std::vector<std::int64_t> want_splits;
    for (int q = 0; q < n; ++q) {
      want_splits.push_back(rows(q, me));
      for (std::int64_t j = 0; j < rows(q, me) * cols; ++j) want.push_back(cell(q, me, j));
    }
    REQUIRE(h.received_splits() == want_splits);
    check_close(static_cast<DeviceTensor&>(*h.outputs().at(0)).download(), want, dtype, std::string("alltoall.") + dtype_name(dtype));
  }
}

TEST_CASE("NCCL reducescatter with rows not divisible by the size", "[reducescatter]") {
  const int me = rank(), n = size();
  const std::int64_t cols = 3;
  for (std::int64_t total_rows : {static_cast<std::int64_t>(2 * n + 1), static_cast<std::int64_t>(2 * n)}) {
    for (DataType dtype : {DataType::Int16, DataType::Int32, DataType::Float16, DataType::Float32, DataType::BFloat16}) {
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Average, ReduceOp::Max}) {
        std::vector<double> in(total_rows * cols);
        for (std::int64_t i = 0; i < total_rows * cols; ++i) in[i] = rank_value(me, i, op);
        auto input = device_tensor(dtype, {total_rows, cols}, in);
        const std::string name = label("reducescatter", dtype, op, total_rows);
        Handle h = reducescatter_async(input, test::device_allocator(), {op, name});
        h.wait();
        const std::int64_t base = total_rows / n, extra = total_rows % n;
        const std::int64_t mine = base + (me < extra ? 1 : 0);
        const std::int64_t offset = me * base + std::min<std::int64_t>(me, extra);
        auto& out = static_cast<DeviceTensor&>(*h.outputs().at(0));
        REQUIRE(out.shape() == TensorShape{mine, cols});
        std::vector<double> want;
        for (std::int64_t i = offset * cols; i < (offset + mine) * cols; ++i) want.push_back(expected(op, i, dtype));
        check_close(out.download(), want, dtype, name);
      }
    }
  }
}

TEST_CASE("NCCL waits for the producer's ready event before reading the input", "[allreduce][readiness]") {
  const std::int64_t n = 4096;
  auto input = device_tensor(DataType::Float32, {n}, std::vector<double>(n, -1.0));
  auto output = DeviceTensor::allocate(DataType::Float32, {n});
  const test::OwnedStream owned;
  cudaStream_t producer = owned.get();
  // The kernel spins ~200 ms before it writes the values; the ready event follows it.
  test::check_cuda(test::launch_delayed_fill(static_cast<float*>(input->data()), n, rank() + 1.0f,
                                             200000000LL, producer), "delayed fill");
  auto ready = std::make_shared<test::CudaReadyEvent>(producer);
  REQUIRE_FALSE(ready->ready());  // the input really is still being written at enqueue
  Handle h = allreduce_async(input, output, {ReduceOp::Sum, "readiness"}, ready);
  h.wait();
  std::vector<double> want(n);
  const double ranks = size() * (size() + 1) / 2.0;
  for (std::int64_t i = 0; i < n; ++i) want[i] = (i + 1) * ranks;
  check_close(output->download(), want, DataType::Float32, "readiness");
}

TEST_CASE("NCCL allgather fused, the first dimension differing by rank and tensor", "[allgather]") {
  auto rows = [](int r, int t) { return static_cast<std::int64_t>((r + t) % 3 + 1); };
  auto value = [](int r, int t, std::int64_t j) { return 100.0 * t + 10.0 * (r + 1) + j % 7; };
  const std::int64_t cols = 2;
  for (DataType dtype : {DataType::Float16, DataType::BFloat16, DataType::Int32, DataType::Float64}) {
    std::vector<TensorPtr> inputs;
    for (int t = 0; t < 3; ++t) {
      std::vector<double> in;
      for (std::int64_t j = 0; j < rows(rank(), t) * cols; ++j) in.push_back(value(rank(), t, j));
      inputs.push_back(device_tensor(dtype, {rows(rank(), t), cols}, in));
    }
    Handle h = grouped_allgather_async(inputs, test::device_allocator(), {std::string("gathered.") + dtype_name(dtype)});
    h.wait();
    for (int t = 0; t < 3; ++t) {
      std::vector<double> want;
      std::int64_t total = 0;
      for (int r = 0; r < size(); ++r) {
        total += rows(r, t);
        for (std::int64_t j = 0; j < rows(r, t) * cols; ++j) want.push_back(value(r, t, j));
      }
      auto& out = static_cast<DeviceTensor&>(*h.outputs().at(t));
      REQUIRE(out.shape() == TensorShape{total, cols});
      check_close(out.download(), want, dtype, "fused allgather tensor " + std::to_string(t));
    }
  }
}

TEST_CASE("NCCL reducescatter fused and padded, with prescale, postscale and integer Average", "[reducescatter]") {
  const int me = rank(), n = size();
  const std::int64_t cols = 2;
  const std::vector<std::int64_t> row_counts = {2 * n + 1, n, 1};  // padded, even, fewer rows than ranks
  for (DataType dtype : {DataType::Int16, DataType::Int32, DataType::Float16, DataType::BFloat16, DataType::Float32}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Average}) {
      const double prescale = test::integer_dtype(dtype) ? 1.0 : 0.5, postscale = test::integer_dtype(dtype) ? 1.0 : 4.0;
      std::vector<TensorPtr> inputs;
      for (auto total_rows : row_counts) {
        std::vector<double> in(total_rows * cols);
        for (std::int64_t i = 0; i < total_rows * cols; ++i) in[i] = rank_value(me, i, op);
        inputs.push_back(device_tensor(dtype, {total_rows, cols}, in));
      }
      ReducescatterOptions options{op, label("scattered", dtype, op, 0), prescale, postscale};
      Handle h = grouped_reducescatter_async(inputs, test::device_allocator(), options);
      h.wait();
      for (std::size_t t = 0; t < row_counts.size(); ++t) {
        const std::int64_t base = row_counts[t] / n, extra = row_counts[t] % n;
        const std::int64_t mine = base + (me < extra ? 1 : 0), offset = me * base + std::min<std::int64_t>(me, extra);
        auto& out = static_cast<DeviceTensor&>(*h.outputs().at(t));
        REQUIRE(out.shape() == TensorShape{mine, cols});
        std::vector<double> want;
        for (std::int64_t i = offset * cols; i < (offset + mine) * cols; ++i) want.push_back(expected(op, i, dtype, prescale, postscale));
        check_close(out.download(), want, dtype, options.name + " tensor " + std::to_string(t));
      }
    }
  }
}

// Outputs the background thread allocates come from a stream-ordered pool (PyTorch's allocator
// on the thread's current stream). The pool may hand out memory that this stream freed while a
// slow kernel on it still writes it: the NCCL stream must wait for the allocation's event.
TEST_CASE("NCCL waits for outputs allocated on another stream", "[readiness][allgather][alltoall][reducescatter]") {
  const test::OwnedStream owned;  // before the handles: their outputs free themselves on it
  cudaStream_t pool = owned.get();
  const std::int64_t cols = 64, rows = 4 * size();
  // A tensor of this stream that a slow kernel (~200 ms) is still writing when it is freed.
  auto recycle = [&] {
    auto old = DeviceTensor::allocate_on(pool, DataType::Float32, {16 * size() * cols});
    test::check_cuda(test::launch_delayed_fill(static_cast<float*>(old->data()), old->num_elements(), -7.0f,
                                               200000000LL, pool), "delayed fill");
  };
  std::vector<double> in(rows * cols);
  for (std::int64_t i = 0; i < rows * cols; ++i) in[i] = rank_value(rank(), i, ReduceOp::Sum);
  auto input = device_tensor(DataType::Float32, {rows, cols}, in);

  recycle();
  Handle g = allgather_async(input, test::stream_allocator(pool), {"pool.allgather"});
  g.wait();
  std::vector<double> want;
  for (int r = 0; r < size(); ++r)
    for (std::int64_t i = 0; i < rows * cols; ++i) want.push_back(rank_value(r, i, ReduceOp::Sum));
  check_close(static_cast<DeviceTensor&>(*g.outputs().at(0)).download(), want, DataType::Float32, "pool allgather");

  recycle();
  Handle a = alltoall_async(input, test::stream_allocator(pool), {{}, "pool.alltoall"});
  a.wait();
  want.clear();
  const std::int64_t block = rows / size() * cols;  // even splits: rank q's block `rank()` comes here
  for (int q = 0; q < size(); ++q)
    for (std::int64_t i = rank() * block; i < (rank() + 1) * block; ++i) want.push_back(rank_value(q, i, ReduceOp::Sum));
  check_close(static_cast<DeviceTensor&>(*a.outputs().at(0)).download(), want, DataType::Float32, "pool alltoall");

  recycle();
  Handle s = reducescatter_async(input, test::stream_allocator(pool), {ReduceOp::Sum, "pool.reducescatter"});
  s.wait();
  want.clear();
  for (std::int64_t i = rank() * block; i < (rank() + 1) * block; ++i) want.push_back(expected(ReduceOp::Sum, i, DataType::Float32));
  check_close(static_cast<DeviceTensor&>(*s.outputs().at(0)).download(), want, DataType::Float32, "pool reducescatter");
  test::check_cuda(cudaStreamSynchronize(pool), "sync");
}

TEST_CASE("a joined rank contributes zeros to the NCCL allreduces it no longer submits", "[allreduce][join]") {
  const std::int64_t n = 100;
  std::vector<double> in(n);
  for (std::int64_t i = 0; i < n; ++i) in[i] = rank_value(rank(), i, ReduceOp::Sum);
  // Every rank's communicator exists before rank 0 joins.
  auto warm = device_tensor(DataType::Float32, {n}, in);
  allreduce_async(warm, warm, {ReduceOp::Sum, "join.warmup"}).wait();
  int last = -1;
  if (rank() == 0) {
    last = join();
  } else {
    // int16 too: it reduces through int64 words, the joined rank's zeros included.
    for (DataType dtype : {DataType::Float32, DataType::Int16}) {
      std::vector<TensorPtr> tensors;
      for (int t = 0; t < 3; ++t) tensors.push_back(device_tensor(dtype, {n}, in));
      // One tensor alone in its response, then two fused: the joined rank must issue the same
      // NCCL call as the others in both cases.
      const std::string name = std::string("join.") + dtype_name(dtype);
      allreduce_async(tensors[0], tensors[0], {ReduceOp::Sum, name + ".single"}).wait();
      grouped_allreduce_async({tensors[1], tensors[2]}, {tensors[1], tensors[2]}, {ReduceOp::Sum, name + ".fused"}).wait();
      std::vector<double> want(n);
      for (std::int64_t i = 0; i < n; ++i)
        want[i] = test::reduced_over_ranks(ReduceOp::Sum, i, dtype, size()) - rank_value(0, i, ReduceOp::Sum);
      for (auto& t : tensors) check_close(static_cast<DeviceTensor&>(*t).download(), want, dtype, name);
    }
    last = join();
  }
  REQUIRE(last >= 0);
  REQUIRE(last < size());
  if (size() > 1) REQUIRE(last != 0);  // rank 0 joined first
}

TEST_CASE("a joined rank contributes zeros to device Adasum", "[adasum][join]") {
  // As in the Sum case above: rank 0 joins and its zeros count, in the node's average (NcclAdasum)
  // or as a participant of Adasum (staged), which then returns the other vector unchanged.
  const int n = size(), me = rank();
  if (n == 1) {
    SUCCEED("a joined rank needs a peer that does not join");
    return;
  }
  const AdasumPath adasum = adasum_path();
  if (!test::power_of_two(adasum.participants)) {
    SUCCEED("Adasum over " << adasum.participants << " participants is refused (the case above)");
    return;
  }
  const std::int64_t count = 6;
  auto contribution = [&](int r) {
    std::vector<double> v(count, 0.0);
    if (r != 0)
      for (std::int64_t i = 0; i < count; ++i) v[i] = (r + 1.0) * ((i + r) % 3 + 1.0);
    return v;
  };
  // The reference: each group's average, then Adasum over the groups.
  std::vector<std::vector<double>> averages;
  for (int g = 0; g < adasum.participants; ++g) {
    std::vector<double> average(count, 0.0);
    for (int r : test::ranks_of_node(g, adasum.group, n)) {
      const auto v = contribution(r);
      for (std::int64_t i = 0; i < count; ++i) average[i] += v[i] / adasum.group;
    }
    averages.push_back(average);
  }
  // Every rank's communicators exist before rank 0 joins.
  auto warm = device_tensor(DataType::Float32, {count}, std::vector<double>(count, 1.0));
  allreduce_async(warm, warm, {ReduceOp::Adasum, "adasum.join.warmup"}).wait();
  if (me == 0) {
    REQUIRE(join() != 0);
    return;
  }
  auto t = device_tensor(DataType::Float32, {count}, contribution(me));
  allreduce_async(t, t, {ReduceOp::Adasum, "adasum.join"}).wait();
  check_close(t->download(), test::adasum_tree(averages), DataType::Float32, "Adasum beside a joined rank");
  join();
}

TEST_CASE("device Adasum of general vectors against the reference, sizes that do not split evenly", "[adasum]") {
  // Vectors neither orthogonal nor parallel, so every coefficient depends on whole-tensor dot
  // products, which the chunked path (Note [Adasum of a node's chunk]) assembles from every local
  // rank's chunk. Fused tensors of 1, odd and uneven sizes, so tensors straddle the chunks and
  // some chunks hold none of a tensor. Float32 and float64: the half dtypes store each level's
  // result in 16 bits, so a double reference would need a tolerance that depends on the tree
  // depth; the exact cases above cover them.
  const int n = size(), me = rank();
  const AdasumPath adasum = adasum_path();
  if (!test::power_of_two(adasum.participants)) {
    SUCCEED("Adasum over " << adasum.participants << " participants is refused (the case above)");
    return;
  }
  const std::vector<std::int64_t> counts = {1, 7, 33, 2 * n + 3, 130};
  auto value = [](int r, std::size_t t, std::int64_t i) {
    return ((r + 3) * (i + 1) * (t + 2) % 13 - 6.0) / 4.0 + (r % 3 == 0 ? 0.5 : -0.25);
  };
  for (DataType dtype : {DataType::Float32, DataType::Float64}) {
    std::vector<TensorPtr> inputs, outputs;
    for (std::size_t t = 0; t < counts.size(); ++t) {
      std::vector<double> v(counts[t]);
      for (std::int64_t i = 0; i < counts[t]; ++i) v[i] = value(me, t, i);
      inputs.push_back(device_tensor(dtype, {counts[t]}, v));
      outputs.push_back(DeviceTensor::allocate(dtype, {counts[t]}));
    }
    AllreduceOptions options{ReduceOp::Adasum, std::string("adasum.general.") + dtype_name(dtype)};
    options.prescale_factor = 0.5, options.postscale_factor = 3.0;  // Adasum scales with its inputs
    grouped_allreduce_async(inputs, outputs, options).wait();
    for (std::size_t t = 0; t < counts.size(); ++t) {
      // Each group's average (of the values as stored), then Adasum over the groups.
      std::vector<std::vector<double>> averages;
      for (int g = 0; g < adasum.participants; ++g) {
        std::vector<double> average(counts[t], 0.0);
        for (int r : test::ranks_of_node(g, adasum.group, n))
          for (std::int64_t i = 0; i < counts[t]; ++i) average[i] += test::round_trip(value(r, t, i), dtype) / adasum.group;
        averages.push_back(average);
      }
      std::vector<double> want = test::adasum_tree(averages);
      for (double& w : want) w *= 0.5 * 3.0;
      check_close(static_cast<DeviceTensor&>(*outputs[t]).download(), want, dtype,
                  options.name + " tensor " + std::to_string(t));
    }
  }
}

TEST_CASE("ranks that disagree on a GPU tensor's dtype all get the same error", "[errors]") {
  const DataType dtype = rank() == 0 ? DataType::Float32 : DataType::Float64;
  auto t = device_tensor(dtype, {8}, std::vector<double>(8, 1.0));
  if (size() == 1) {
    allreduce_async(t, t, {ReduceOp::Sum, "errors.dtype"}).wait();
    return;
  }
  try {
    allreduce_async(t, t, {ReduceOp::Sum, "errors.dtype"}).wait();
    FAIL("a dtype mismatch reduced");
  } catch (const Error& e) {
    const std::string message = e.what();
    INFO(message);
    REQUIRE(message.find("errors.dtype") != std::string::npos);
    REQUIRE(message.find("float64") != std::string::npos);
  }
  // The runtime and the communicator are still usable.
  auto ok = device_tensor(DataType::Float32, {4}, std::vector<double>(4, 1.0));
  allreduce_async(ok, ok, {ReduceOp::Sum, "errors.after"}).wait();
  check_close(ok->download(), std::vector<double>(4, size()), DataType::Float32, "after the error");
}

int main(int argc, char** argv) {
  if (const int skip = test::start_on_gpu("the NCCL GPU tests")) return skip;
  if (rank() == 0) {
    int version = 0;
    ncclGetVersion(&version);
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, 0);
    std::printf("NCCL %d on %s, %d rank(s)\n", version, prop.name, size());
  }
  return test::run_session_on_every_rank(argc, argv);
}
