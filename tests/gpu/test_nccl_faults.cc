// Failures on the NCCL path, injected through the emulated CUDA runtime and NCCL (emulated only:
// tests/gpu/emulation/emulation_control.h). Each tag is its own ctest run, since some leave the
// GPU path failed for the rest of the process:
//   [async]     an asynchronous NCCL error on one rank fails the operation on every rank, and the
//               later ones, instead of leaving the peers waiting forever;
//   [init]      a rank that never reaches a communicator's creation fails it on every rank within
//               HOROVOD_START_TIMEOUT; the next operation creates it again and works;
//   [enqueue]   a kernel that fails after the collective fails only its own rank's operation;
//   [enqueue-abort] one that fails before it fails every rank (the communicators are aborted);
//               With HVD_EMU_PEER_ABORTS_UNSEEN=1 (NCCL between the GPUs of one node reports no
//               peer's abort), the aborting rank tells them itself;
//   [arguments] host memory behind a device tensor is refused by NCCL on every rank;
//   [shutdown]  hvd::shutdown() is bounded when a peer never finalizes its communicators;
//   [plan], [plan-memory], [device]  a plan that fails (an output allocator that throws on one
//               rank or on every rank, a tensor on another device on one rank) stops the job on
//               every rank within seconds, with the failed rank's reason, and the failed
//               operation's stream never writes memory the caller got back. These run under
//               stopped_job.sh: the rank that stops cannot finalize MPI;
//   [nodes-adasum], [nodes-hierarchical]  (2 nodes x 2 ranks) a rank whose node step fails makes
//               the operation fail on the other node's ranks too, whose own node step succeeded:
//               the ops' host step agrees on the outcome, so no rank returns a result that
//               another node's garbage went into.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "emulation_control.h"
#include "tests/common/rank_markers.h"
#include "tests/gpu/gpu_test_util.h"

using namespace hvd;
using hvd::test::DeviceTensor;
using Clock = std::chrono::steady_clock;

namespace {

bool g_time_shutdown = false;

test::DeviceTensorPtr device_values(std::int64_t n, double factor) {
  std::vector<double> values(n);
  for (std::int64_t i = 0; i < n; ++i) values[i] = factor * (i % 7 + 1);
  auto t = DeviceTensor::allocate(DataType::Float32, {n});
  t->upload(values);
  return t;
}

// Sum over ranks of (r + 1) * (i % 7 + 1).
std::vector<double> summed(std::int64_t n) {
  std::vector<double> want(n);
  for (std::int64_t i = 0; i < n; ++i) want[i] = size() * (size() + 1) / 2.0 * (i % 7 + 1);
  return want;
}

void warm_up() {
  auto t = device_values(16, rank() + 1);
  allreduce_async(t, t, {ReduceOp::Sum, "warmup"}).wait();
  REQUIRE(t->download() == summed(16));
}

// The message of the error `handle` completes with; fails the test when it succeeds.
std::string error_of(Handle handle) {
  try {
    handle.wait();
  } catch (const Error& e) {
    return e.what();
  }
  FAIL("the operation succeeded on rank " << rank());
  return {};
}

// The job has stopped (Note [An exception in the executor stops every rank]): the next collective
// is refused on this rank, naming the operation that stopped it.
void expect_stopped(const std::string& culprit) {
  auto t = device_values(16, rank() + 1);
  try {
    allreduce_async(t, t, {ReduceOp::Sum, "after.stop"}).wait();
    FAIL("a collective ran after the job stopped, on rank " << rank());
  } catch (const Error& e) {
    const std::string message = e.what();
    INFO(message);
    REQUIRE(message.find("stopped") != std::string::npos);
    REQUIRE(message.find(culprit) != std::string::npos);
  }
}

// A tensor that claims a device but whose bytes are host memory (a broken adapter).
class HostBytesOnDevice final : public Tensor {
 public:
  explicit HostBytesOnDevice(std::int64_t n) : shape_{n}, bytes_(n * 4) {}
  DataType dtype() const override { return DataType::Float32; }
  const TensorShape& shape() const override { return shape_; }
  void* data() override { return bytes_.data(); }
  int device() const override {
    int d = 0;
    cudaGetDevice(&d);
    return d;
  }

 private:
  TensorShape shape_;
  std::vector<unsigned char> bytes_;
};

}  // namespace

TEST_CASE("an asynchronous NCCL error on one rank fails the operation on every rank", "[async]") {
  warm_up();
  if (rank() == 0) emu::inject_async_error(1, ncclSystemError);
  auto t = device_values(64, rank() + 1);
  const auto start = Clock::now();
  const std::string message = error_of(allreduce_async(t, t, {ReduceOp::Sum, "async.failed"}));
  INFO(message);
  CHECK(Clock::now() - start < std::chrono::seconds(20));
  REQUIRE(message.find("async.failed") != std::string::npos);
  if (rank() == 0) {
    REQUIRE(message.find("unhandled system error") != std::string::npos);
  } else {
    REQUIRE(message.find("remote process exited") != std::string::npos);
  }
  // Later GPU collectives fail at once, on every rank, saying why.
  auto later = device_values(8, 1);
  const std::string again = error_of(allreduce_async(later, later, {ReduceOp::Sum, "async.later"}));
  INFO(again);
  REQUIRE(again.find("aborted") != std::string::npos);
}

TEST_CASE("a rank that never reaches a communicator's creation fails it on every rank in time", "[init]") {
  if (rank() == size() - 1) emu::stall_comm_init(1);
  auto t = device_values(32, rank() + 1);
  const auto start = Clock::now();
  const std::string message = error_of(allreduce_async(t, t, {ReduceOp::Sum, "init.stalled"}));
  INFO(message);
  CHECK(Clock::now() - start < std::chrono::seconds(30));
  REQUIRE(message.find("HOROVOD_START_TIMEOUT") != std::string::npos);
  // The next operation creates the communicator again, and every rank arrives this time.
  auto u = device_values(32, rank() + 1);
  allreduce_async(u, u, {ReduceOp::Sum, "init.retried"}).wait();
  REQUIRE(u->download() == summed(32));
}

// The second output allocation fails (on every rank) after the first output of the group exists;
// the inputs are still being produced (~200 ms) when the error comes back. Whatever the failed
// operation had enqueued must be finished before the caller gets its memory back: here the
// caller's next tensor reuses the first output's memory from the same stream-ordered pool. An
// allocator that throws stops the job, as on the host (Note [An exception in the executor stops
// every rank]): no rank can tell that every rank failed alike.
TEST_CASE("a failed operation's stream never writes memory the caller got back", "[plan-memory]") {
  warm_up();
  // Before the tensors and handles: they free themselves on these streams.
  const test::OwnedStream owned_pool, owned_producer;
  cudaStream_t pool = owned_pool.get(), producer = owned_producer.get();
  const std::int64_t n = 64 * size();
  std::vector<TensorPtr> inputs;
  std::vector<ReadyEventPtr> ready;
  for (int t = 0; t < 2; ++t) {
    auto input = DeviceTensor::allocate(DataType::Float32, {n});
    test::check_cuda(test::launch_delayed_fill(static_cast<float*>(input->data()), n, rank() + 1.0f, 200000000LL, producer),
                     "delayed fill");
    ready.push_back(std::make_shared<test::CudaReadyEvent>(producer));
    inputs.push_back(input);
  }
  int calls = 0;
  OutputAllocator second_fails = [&](DataType dtype, const TensorShape& shape) -> TensorPtr {
    if (++calls == 2) throw Error("no memory for the second output (injected by the test)");
    return DeviceTensor::allocate_on(pool, dtype, shape);
  };
  {
    const std::string message =
        error_of(grouped_reducescatter_async(inputs, second_fails, {ReduceOp::Sum, "enqueue.scatter"}, ready));
    INFO(message);
    REQUIRE(message.find("second output") != std::string::npos);
  }  // the handle, and the first output with it, are gone: its memory is back in the pool
  auto mine = DeviceTensor::allocate_on(pool, DataType::Float32, {n / size()});
  std::vector<double> values(static_cast<std::size_t>(n / size()), 42.0);
  mine->upload(values);
  test::check_cuda(cudaStreamSynchronize(producer), "producer");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // anything still queued has run
  REQUIRE(mine->download() == values);
  expect_stopped("enqueue.scatter");
}

TEST_CASE("a kernel that fails after the collective fails only its own rank's operation", "[enqueue]") {
  warm_up();
  // Copy in (launch 1), allreduce, copy out (launch 2): the copy out fails on rank 0.
  if (rank() == 0) emu::fail_kernel_launch(2, cudaErrorLaunchOutOfResources);
  std::vector<TensorPtr> tensors = {device_values(10, rank() + 1), device_values(20, rank() + 1)};
  Handle h = grouped_allreduce_async(tensors, tensors, {ReduceOp::Sum, "enqueue.local"});
  if (rank() == 0) {
    const std::string message = error_of(h);
    INFO(message);
    REQUIRE(message.find("cudaErrorLaunchOutOfResources") != std::string::npos);
  } else {
    h.wait();
    REQUIRE(static_cast<DeviceTensor&>(*tensors[1]).download() == summed(20));
  }
  // The communicator is intact: the next fused allreduce is right everywhere.
  std::vector<TensorPtr> next = {device_values(10, rank() + 1), device_values(20, rank() + 1)};
  grouped_allreduce_async(next, next, {ReduceOp::Sum, "enqueue.next"}).wait();
  REQUIRE(static_cast<DeviceTensor&>(*next[0]).download() == summed(10));
  REQUIRE(static_cast<DeviceTensor&>(*next[1]).download() == summed(20));
}

// The copy into the fusion buffer fails on rank 0: the peers' allreduce would wait for rank 0
// forever. Rank 0 aborts its communicators, so every rank fails. The emulation, like NCCL over a
// network, reports a peer's abort as ncclRemoteError. Between the GPUs of one node NCCL does not
// (the ctest test_nccl_faults_abort_unseen_emulated sets HVD_EMU_PEER_ABORTS_UNSEEN=1): then only
// rank 0's own notice (Note [Peers learn of an abort from this rank]) spares the peers a wait
// until HOROVOD_LIVENESS_TIMEOUT_SECONDS, and gives them its reason.
TEST_CASE("a kernel that fails before the collective fails the operation on every rank", "[enqueue-abort]") {
  const char* unseen_setting = std::getenv("HVD_EMU_PEER_ABORTS_UNSEEN");
  const bool unseen = unseen_setting != nullptr && std::string(unseen_setting) == "1";
  warm_up();
  if (rank() == 0) emu::fail_kernel_launch(1, cudaErrorLaunchOutOfResources);
  std::vector<TensorPtr> tensors = {device_values(10, rank() + 1), device_values(20, rank() + 1)};
  const auto start = Clock::now();
  const std::string message = error_of(grouped_allreduce_async(tensors, tensors, {ReduceOp::Sum, "enqueue.shared"}));
  INFO(message);
  CHECK(Clock::now() - start < std::chrono::seconds(20));
  REQUIRE(message.find("enqueue.shared") != std::string::npos);
  if (rank() == 0 || unseen) REQUIRE(message.find("cudaErrorLaunchOutOfResources") != std::string::npos);
  if (rank() != 0) {
    REQUIRE(message.find(unseen ? "rank 0 aborted its NCCL communicators" : "remote process exited") !=
            std::string::npos);
  }
  auto later = device_values(8, 1);
  const std::string again = error_of(allreduce_async(later, later, {ReduceOp::Sum, "enqueue.later"}));
  INFO(again);
  REQUIRE(again.find("aborted") != std::string::npos);
}

TEST_CASE("host memory behind a device tensor is refused on every rank", "[arguments]") {
  warm_up();
  auto bad = std::make_shared<HostBytesOnDevice>(16);
  const std::string message = error_of(allreduce_async(bad, bad, {ReduceOp::Sum, "arguments.host"}));
  INFO(message);
  REQUIRE(message.find("arguments.host") != std::string::npos);
  REQUIRE(message.find("invalid argument") != std::string::npos);
  REQUIRE(message.find("host memory") != std::string::npos);
}

// Whether this rank is on the node of `failing_rank` (HVD_TEST_FAKE_LOCAL_SIZE: consecutive ranks).
bool on_failing_node(int failing_rank) { return rank() / local_size() == failing_rank / local_size(); }

// Every rank aborted its communicators: a later GPU collective fails at once, saying why.
void expect_aborted() {
  auto later = device_values(8, 1);
  const std::string again = error_of(allreduce_async(later, later, {ReduceOp::Sum, "nodes.later"}));
  INFO(again);
  REQUIRE(again.find("aborted") != std::string::npos);
}

// Rank 3's node average never completes (its communicator reports an error): ranks 0 and 1
// averaged their node's vectors fine, and would otherwise have combined them with rank 3's node's
// stale staging buffer and returned that.
TEST_CASE("device Adasum fails on every node when one node's average fails", "[nodes-adasum]") {
  REQUIRE(local_size() == 2);
  REQUIRE(size() == 4);
  warm_up();
  const int failing = 3;
  if (rank() == failing) emu::inject_async_error(1, ncclSystemError);
  auto t = device_values(48, rank() + 1);
  const auto start = Clock::now();
  const std::string message = error_of(allreduce_async(t, t, {ReduceOp::Adasum, "nodes.adasum"}));
  INFO(message);
  CHECK(Clock::now() - start < std::chrono::seconds(20));
  REQUIRE(message.find("nodes.adasum") != std::string::npos);
  if (rank() == failing) {
    REQUIRE(message.find("unhandled system error") != std::string::npos);
  } else if (!on_failing_node(failing)) {
    REQUIRE(message.find("another rank failed its part of the node's average") != std::string::npos);
  }
  expect_aborted();
}

// Rank 0's copy into the fusion buffer fails before the intra-node reduce-scatter: ranks 2 and 3
// reduced and exchanged fine, and would otherwise have gathered a cross-node sum with rank 0's
// node's garbage in it.
TEST_CASE("hierarchical allreduce fails on every node when one node's reduce-scatter fails",
          "[nodes-hierarchical]") {
  REQUIRE(local_size() == 2);
  REQUIRE(size() == 4);
  warm_up();
  const int failing = 0;
  if (rank() == failing) emu::fail_kernel_launch(1, cudaErrorLaunchOutOfResources);
  std::vector<TensorPtr> tensors = {device_values(10, rank() + 1), device_values(21, rank() + 1)};
  const auto start = Clock::now();
  const std::string message =
      error_of(grouped_allreduce_async(tensors, tensors, {ReduceOp::Sum, "nodes.hierarchical"}));
  INFO(message);
  CHECK(Clock::now() - start < std::chrono::seconds(20));
  REQUIRE(message.find("nodes.hierarchical") != std::string::npos);
  if (rank() == failing) {
    REQUIRE(message.find("cudaErrorLaunchOutOfResources") != std::string::npos);
  } else if (!on_failing_node(failing)) {
    REQUIRE(message.find("another rank failed its part of the hierarchical allreduce") != std::string::npos);
  }
  expect_aborted();
}

// Rank 0's output allocator throws in an allgather's plan, before anything is enqueued there,
// while the other ranks enqueue the collective and wait in it for rank 0. Rank 0 stops the job
// (Note [An exception in the executor stops every rank]) and the others learn why within
// seconds; returning the error on rank 0 alone would leave them waiting until the liveness
// timeout (30 min), and rank 0's next collective would pair with their allgather.
TEST_CASE("a plan that fails on one rank only stops the job on every rank, saying why", "[plan]") {
  warm_up();
  OutputAllocator fails_on_0 = [](DataType dtype, const TensorShape& shape) -> TensorPtr {
    if (rank() == 0) throw Error("no device memory for the output (injected by the test)");
    return DeviceTensor::allocate(dtype, shape);
  };
  auto in = device_values(16, rank() + 1);
  const auto start = Clock::now();
  const std::string message = error_of(allgather_async(in, fails_on_0, {"plan.gather"}));
  INFO(message);
  CHECK(Clock::now() - start < std::chrono::seconds(20));
  REQUIRE(message.find("plan.gather") != std::string::npos);
  REQUIRE(message.find("failed on rank 0") != std::string::npos);
  REQUIRE(message.find("injected by the test") != std::string::npos);
  expect_stopped("plan.gather");
}

// Rank 0's tensor is on another device than its communicators (a program that did not pin one
// device per process): rank 0 stops the job, naming both devices, and its peers, which already
// wait in the allreduce, learn why.
TEST_CASE("a tensor on another device than the communicators' stops the job on every rank", "[device]") {
  if (test::cuda_device_count() < 2) {
    SUCCEED("needs two devices per process");
    return;
  }
  warm_up();
  int current = 0;
  test::check_cuda(cudaGetDevice(&current), "cudaGetDevice");
  const int other = (current + 1) % test::cuda_device_count();
  if (rank() == 0) test::check_cuda(cudaSetDevice(other), "cudaSetDevice");
  auto t = device_values(8, rank() + 1);
  test::check_cuda(cudaSetDevice(current), "cudaSetDevice");
  const std::string message = error_of(allreduce_async(t, t, {ReduceOp::Sum, "device.other"}));
  INFO(message);
  REQUIRE(message.find("device.other") != std::string::npos);
  REQUIRE(message.find("failed on rank 0") != std::string::npos);
  // Rank 0's devices, as main() pinned them: local rank 0 on device 0, its tensor on device 1.
  REQUIRE(message.find("created on CUDA device 0 but this tensor is on device 1") != std::string::npos);
  expect_stopped("device.other");
}

TEST_CASE("shutdown is bounded when a peer never finalizes its communicators", "[shutdown]") {
  warm_up();
  if (rank() == size() - 1) emu::stall_finalize();
  g_time_shutdown = true;  // main() times hvd::shutdown()
}

int main(int argc, char** argv) {
  init();
  test::check_cuda(cudaSetDevice(local_rank() % test::cuda_device_count()), "cudaSetDevice");
  const int failed = Catch::Session().run(argc, argv);
  const int me = rank(), ranks = size();
  const auto start = Clock::now();
  shutdown();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (g_time_shutdown) {
    std::printf("rank %d: hvd::shutdown() took %.1f s\n", me, seconds);
    if (seconds > 20) return 1;
  }
  // After a stopped job (stopped_job.sh sets HVD_TEST_DIR) the stopping rank exits without
  // finalizing MPI, and mpirun then kills the ranks still printing their results.
  if (const char* dir = std::getenv("HVD_TEST_DIR"))
    test::mark_and_wait_for_ranks(std::string(dir) + "/left.", me, ranks, std::chrono::seconds(30));
  return failed == 0 ? 0 : 1;
}
