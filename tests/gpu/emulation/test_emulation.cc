// The emulated CUDA runtime and NCCL themselves (np=2, no horovodcpp): what the GPU tests rely on
// it to model. Streams are ordered only by events, a stream-ordered free poisons in stream order,
// NCCL refuses host and foreign-device pointers, collectives give their closed forms across
// processes, nonblocking communicators go through ncclInProgress, a peer's abort reaches a
// waiting rank as ncclRemoteError, and a rank's part of an operation outlives its abort.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "emulation_control.h"

namespace {

int g_rank = 0, g_size = 1;

void ok(cudaError_t e) { REQUIRE(e == cudaSuccess); }
void ok(ncclResult_t r) { REQUIRE(r == ncclSuccess); }

std::vector<float> download(const void* device, std::size_t count) {
  std::vector<float> host(count);
  ok(cudaMemcpy(host.data(), device, count * sizeof(float), cudaMemcpyDeviceToHost));
  return host;
}

void upload(void* device, const std::vector<float>& values) {
  ok(cudaMemcpy(device, values.data(), values.size() * sizeof(float), cudaMemcpyHostToDevice));
}

ncclComm_t make_comm(bool blocking) {
  ncclUniqueId id{};
  if (g_rank == 0) ok(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm = nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = blocking ? 1 : 0;
  const ncclResult_t r = ncclCommInitRankConfig(&comm, g_size, id, g_rank, &config);
  REQUIRE(r == (blocking ? ncclSuccess : ncclInProgress));
  ncclResult_t state = ncclInProgress;
  while (state == ncclInProgress) ok(ncclCommGetAsyncError(comm, &state));
  REQUIRE(state == ncclSuccess);
  return comm;
}

}  // namespace

TEST_CASE("streams are ordered by events only") {
  cudaStream_t producer, consumer;
  ok(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking));
  ok(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking));
  float *a, *b;
  ok(cudaMalloc(reinterpret_cast<void**>(&a), 64 * sizeof(float)));
  ok(cudaMalloc(reinterpret_cast<void**>(&b), 64 * sizeof(float)));
  upload(a, std::vector<float>(64, 1.0f));
  ok(hvd::emu::sleep_on_stream(producer, 100));
  ok(cudaMemsetAsync(a, 0, 64 * sizeof(float), producer));
  ok(cudaMemcpyAsync(b, a, 64 * sizeof(float), cudaMemcpyDeviceToDevice, consumer));
  ok(cudaStreamSynchronize(consumer));
  CHECK(download(b, 64)[0] == 1.0f);  // read before the producer got there
  cudaEvent_t written;
  ok(cudaEventCreate(&written));
  ok(cudaEventRecord(written, producer));
  CHECK(cudaEventQuery(written) == cudaErrorNotReady);
  ok(cudaStreamWaitEvent(consumer, written, 0));
  ok(cudaMemcpyAsync(b, a, 64 * sizeof(float), cudaMemcpyDeviceToDevice, consumer));
  ok(cudaStreamSynchronize(consumer));
  CHECK(download(b, 64)[0] == 0.0f);
  ok(cudaEventDestroy(written));
  ok(cudaFree(a));
  ok(cudaFree(b));
  ok(cudaStreamDestroy(producer));
  ok(cudaStreamDestroy(consumer));
}

TEST_CASE("a stream-ordered free poisons in stream order and the stream may reuse the block at once") {
  cudaStream_t s;
  ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  void* first = nullptr;
  ok(cudaMallocAsync(&first, 256, s));
  std::vector<float> ones(64, 1.0f);
  ok(cudaMemcpyAsync(first, ones.data(), 256, cudaMemcpyHostToDevice, s));
  ok(cudaFreeAsync(first, s));
  void* second = nullptr;
  ok(cudaMallocAsync(&second, 256, s));
  CHECK(second == first);  // the pool hands the block to the same stream before the free ran
  std::vector<float> got(64);
  ok(cudaMemcpyAsync(got.data(), second, 256, cudaMemcpyDeviceToHost, s));
  CHECK(std::isnan(got[0]));  // poisoned: nothing was written since the allocation
  ok(cudaFreeAsync(second, s));
  ok(cudaStreamSynchronize(s));
  ok(cudaStreamDestroy(s));
}

TEST_CASE("emulated NCCL checks pointers as NCCL does and reduces across processes") {
  ncclComm_t comm = make_comm(true);
  cudaStream_t s;
  ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::vector<float> host(8, 1.0f);
  REQUIRE(ncclAllReduce(host.data(), host.data(), 8, ncclFloat32, ncclSum, comm, s) == ncclInvalidArgument);
  CHECK(std::string(ncclGetLastError(comm)).find("host memory") != std::string::npos);
  int devices = 0;
  ok(cudaGetDeviceCount(&devices));
  REQUIRE(devices >= 2);
  float* foreign;
  ok(cudaSetDevice(1));
  ok(cudaMalloc(reinterpret_cast<void**>(&foreign), 32));
  ok(cudaSetDevice(0));
  REQUIRE(ncclAllReduce(foreign, foreign, 8, ncclFloat32, ncclSum, comm, s) == ncclInvalidArgument);
  CHECK(std::string(ncclGetLastError(comm)).find("device 1") != std::string::npos);

  float *x, *gathered, *scattered;
  ok(cudaMalloc(reinterpret_cast<void**>(&x), 4 * g_size * sizeof(float)));
  ok(cudaMalloc(reinterpret_cast<void**>(&gathered), 4 * g_size * g_size * sizeof(float)));
  ok(cudaMalloc(reinterpret_cast<void**>(&scattered), 4 * sizeof(float)));
  std::vector<float> mine(4 * g_size);
  for (int i = 0; i < 4 * g_size; ++i) mine[i] = (g_rank + 1) * (i + 1);
  upload(x, mine);
  ok(ncclAllGather(x, gathered, 4 * g_size, ncclFloat32, comm, s));
  ok(ncclReduceScatter(x, scattered, 4, ncclFloat32, ncclMax, comm, s));
  ok(ncclAllReduce(x, x, 4 * g_size, ncclFloat32, ncclSum, comm, s));
  ok(cudaStreamSynchronize(s));
  const float ranks = g_size * (g_size + 1) / 2.0f;
  const auto sum = download(x, 4 * g_size), all = download(gathered, 4 * g_size * g_size), max = download(scattered, 4);
  for (int i = 0; i < 4 * g_size; ++i) CHECK(sum[i] == ranks * (i + 1));
  for (int r = 0; r < g_size; ++r)
    for (int i = 0; i < 4 * g_size; ++i) CHECK(all[r * 4 * g_size + i] == (r + 1) * (i + 1));
  for (int i = 0; i < 4; ++i) CHECK(max[i] == g_size * (g_rank * 4 + i + 1));
  ok(ncclCommDestroy(comm));
  ok(cudaFree(x));
  ok(cudaFree(gathered));
  ok(cudaFree(scattered));
  ok(cudaFree(foreign));
  ok(cudaStreamDestroy(s));
}

TEST_CASE("a nonblocking communicator, and a peer's abort seen as ncclRemoteError") {
  ncclComm_t comm = make_comm(false);
  cudaStream_t s;
  ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float* x;
  ok(cudaMalloc(reinterpret_cast<void**>(&x), 16));
  upload(x, {1, 2, 3, 4});
  // The first launch connects in the background.
  REQUIRE(ncclAllReduce(x, x, 4, ncclFloat32, ncclSum, comm, s) == ncclInProgress);
  ncclResult_t state = ncclInProgress;
  while (state == ncclInProgress) ok(ncclCommGetAsyncError(comm, &state));
  REQUIRE(state == ncclSuccess);
  ok(cudaStreamSynchronize(s));
  CHECK(download(x, 4)[3] == 4.0f * g_size);
  if (g_size > 1) {
    if (g_rank == 1) {
      ok(ncclCommAbort(comm));
    } else {
      ok(ncclAllReduce(x, x, 4, ncclFloat32, ncclSum, comm, s));  // rank 1 never joins it
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (state == ncclSuccess && std::chrono::steady_clock::now() < until) {
        ok(ncclCommGetAsyncError(comm, &state));
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      CHECK(state == ncclRemoteError);
      ok(ncclCommAbort(comm));  // the hung collective ends
      ok(cudaStreamSynchronize(s));
    }
  } else {
    REQUIRE(ncclCommFinalize(comm) == ncclInProgress);
    do {
      ok(ncclCommGetAsyncError(comm, &state));
    } while (state == ncclInProgress);
    REQUIRE(state == ncclSuccess);
    ok(ncclCommDestroy(comm));
  }
  ok(cudaFree(x));
  ok(cudaStreamDestroy(s));
}

// On a GPU a rank that is done with its part of a collective may abort (or destroy) its
// communicator while a slower peer still completes the operation. Here the peer reads this rank's
// part from shared memory only after the abort: it must still be there, and the sum right.
TEST_CASE("a rank that aborts right after its part of an operation leaves it readable to a slower peer") {
  if (g_size < 2) return;
  ncclComm_t comm = make_comm(true);
  cudaStream_t s;
  ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float* x;
  ok(cudaMalloc(reinterpret_cast<void**>(&x), 16));
  upload(x, {1, 2, 3, 4});
  if (g_rank == 0) hvd::emu::hold_next_read(300);
  ok(ncclAllReduce(x, x, 4, ncclFloat32, ncclSum, comm, s));
  ok(cudaStreamSynchronize(s));
  if (g_rank != 0) ok(ncclCommAbort(comm));  // rank 0 has not read this rank's part yet
  CHECK(download(x, 4) == std::vector<float>{1.0f * g_size, 2.0f * g_size, 3.0f * g_size, 4.0f * g_size});
  if (g_rank == 0) ok(ncclCommAbort(comm));
  ok(cudaFree(x));
  ok(cudaStreamDestroy(s));
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  const int failed = Catch::Session().run(argc, argv);
  MPI_Finalize();
  return failed == 0 ? 0 : 1;
}
