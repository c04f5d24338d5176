// Our allreduce (hvd::allreduce_async on a device tensor, through negotiation, the NCCL backend
// and the finalizer) against a raw ncclAllReduce on a communicator of its own, for float32
// buffers of 4 KB to 256 MB, both synchronous per call (ours includes negotiation and the cycle
// time, HOROVOD_CYCLE_TIME). Prints one markdown table on rank 0.
// Exits with 77 (skipped) when no CUDA device is present. Usage: nccl_allreduce_benchmark
// [max_bytes]  (default 256 MB).
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tests/gpu/gpu_test_util.h"

using namespace hvd;
using Clock = std::chrono::steady_clock;

namespace {

void check_nccl(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw Error(std::string(what) + ": " + ncclGetErrorString(r));
}

// The raw peer: rank 0's unique id travels through our own broadcast (a host tensor).
ncclComm_t raw_comm() {
  ncclUniqueId id{};
  if (rank() == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  auto bytes = HostTensor::wrap(&id, DataType::UInt8, {static_cast<std::int64_t>(sizeof(id))});
  broadcast_async(bytes, bytes, {0, "bench.nccl_id"}).wait();
  ncclComm_t comm = nullptr;
  check_nccl(ncclCommInitRank(&comm, size(), id, rank()), "ncclCommInitRank");
  return comm;
}

int iterations(std::int64_t bytes) {
  const std::int64_t budget = std::int64_t{2} << 30;  // ~2 GB moved per measurement
  return static_cast<int>(std::max<std::int64_t>(10, std::min<std::int64_t>(200, budget / bytes)));
}

double time_ours(const test::DeviceTensorPtr& t, int iters) {
  const std::string name = "bench.ours." + std::to_string(t->size_bytes());
  for (int i = 0; i < 3; ++i) allreduce_async(t, t, {ReduceOp::Sum, name}).wait();
  const auto start = Clock::now();
  for (int i = 0; i < iters; ++i) allreduce_async(t, t, {ReduceOp::Sum, name}).wait();
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / iters;
}

double time_raw(const test::DeviceTensorPtr& t, ncclComm_t comm, cudaStream_t stream, int iters) {
  auto once = [&] {
    check_nccl(ncclAllReduce(t->data(), t->data(), t->num_elements(), ncclFloat32, ncclSum, comm, stream),
               "ncclAllReduce");
    test::check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  };
  for (int i = 0; i < 3; ++i) once();
  barrier();
  const auto start = Clock::now();
  for (int i = 0; i < iters; ++i) once();
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / iters;
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t max_bytes = argc > 1 ? std::atoll(argv[1]) : (std::int64_t{256} << 20);
  if (const int skip = test::start_on_gpu("the allreduce benchmark")) return skip;
  ncclComm_t comm = raw_comm();
  cudaStream_t stream;
  test::check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  if (rank() == 0) {
    std::printf("| measurement | horovodcpp | reference | reference is | ratio |\n|---|---|---|---|---|\n");
  }
  for (std::int64_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
    auto t = test::DeviceTensor::allocate(DataType::Float32, {bytes / 4});
    test::check_cuda(cudaMemset(t->data(), 0, bytes), "cudaMemset");
    const int iters = iterations(bytes);
    barrier();
    const double ours = time_ours(t, iters);
    const double raw = time_raw(t, comm, stream, iters);
    if (rank() == 0) {
      const long long kb = static_cast<long long>(bytes >> 10);
      std::printf("| allreduce float32 %lld %s, np=%d | %.1f us | %.1f us | raw ncclAllReduce | %.2fx |\n",
                  kb >= 1024 ? kb / 1024 : kb, kb >= 1024 ? "MB" : "KB", size(), ours, raw, ours / raw);
      std::fflush(stdout);
    }
  }
  ncclCommDestroy(comm);
  cudaStreamDestroy(stream);
  shutdown();
  return 0;
}
