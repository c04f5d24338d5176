// GPU tests of the NCCL backend: every collective and dtype against a closed form, fused and
// unfused, on device tensors; and readiness ordering (the op must wait for the producer's
// event). Run under mpirun at np=1 (and np=2 where ranks may share a GPU); each rank exits with
// the ctest skip code when no CUDA device is present.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tests/common/rank_reduction.h"
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

}  // namespace

TEST_CASE("NCCL allreduce of every dtype and op, one tensor at a time") {
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

TEST_CASE("NCCL allreduce in place") {
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

TEST_CASE("NCCL allreduce fused through the device fusion buffer") {
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

TEST_CASE("NCCL allreduce applies prescale and postscale on the device") {
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

TEST_CASE("NCCL allgather with a different first dimension on each rank") {
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
    check_close(out.download(), want, dtype, "allgather");
  }
}

TEST_CASE("NCCL broadcast from the last rank") {
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
    check_close(t->download(), want, dtype, "broadcast");
  }
}

TEST_CASE("NCCL alltoall with uneven splits") {
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
    check_close(static_cast<DeviceTensor&>(*h.outputs().at(0)).download(), want, dtype, "alltoall");
  }
}

TEST_CASE("NCCL reducescatter with rows not divisible by the size") {
  const int me = rank(), n = size();
  const std::int64_t cols = 3;
  for (std::int64_t total_rows : {static_cast<std::int64_t>(2 * n + 1), static_cast<std::int64_t>(2 * n)}) {
    for (DataType dtype : {DataType::Int32, DataType::Float16, DataType::Float32, DataType::BFloat16}) {
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

TEST_CASE("NCCL waits for the producer's ready event before reading the input") {
  const std::int64_t n = 4096;
  auto input = device_tensor(DataType::Float32, {n}, std::vector<double>(n, -1.0));
  auto output = DeviceTensor::allocate(DataType::Float32, {n});
  cudaStream_t producer;
  test::check_cuda(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking), "stream");
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
  cudaStreamDestroy(producer);
}

int main(int argc, char** argv) {
  if (test::cuda_device_count() == 0) {
    std::printf("SKIPPED: no CUDA device is present (cudaGetDeviceCount reports none); "
                "the NCCL GPU tests need a GPU\n");
    return test::kSkipReturnCode;
  }
  init();
  const std::string why = test::gpu_skip_reason();
  if (!why.empty()) {
    if (rank() == 0) std::printf("SKIPPED: %s\n", why.c_str());
    shutdown();
    return test::kSkipReturnCode;
  }
  test::check_cuda(cudaSetDevice(local_rank() % test::cuda_device_count()), "cudaSetDevice");
  if (rank() == 0) {
    int version = 0;
    ncclGetVersion(&version);
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, 0);
    std::printf("NCCL %d on %s, %d rank(s)\n", version, prop.name, size());
  }
  const int failed = Catch::Session().run(argc, argv);
  shutdown();
  return failed == 0 ? 0 : 1;
}
