// A rank that finishes first: the last rank calls hvd::shutdown() while the others are still
// running (issue 10's "save on rank 0 after training"). Its shutdown returns promptly, the
// others' local queries keep answering, and their collectives fail naming the rank that left.
// Ends the runtime, so it runs in a program of its own.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "core/introspection.h"
#include "test_support.h"

using namespace hvd;
using Clock = std::chrono::steady_clock;

namespace {
double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}
}  // namespace

TEST_CASE("a peer's shutdown ends collectives but not local queries", "[peer_shutdown]") {
  const int size = hvd::size();
  const int leaver = size - 1;
  const int me = hvd::rank();
  const int local_rank = hvd::local_rank(), local_size = hvd::local_size();
  const int cross_rank = hvd::cross_rank(), cross_size = hvd::cross_size();

  auto t = test::filled(DataType::Float32, {3}, [&](std::int64_t i) { return (me + 1) * (i + 1); });
  allreduce_async(t, t, {ReduceOp::Sum, "before.leaving"}).wait();
  for (int i = 0; i < 3; ++i) CHECK(test::read_as_double(*t, i) == size * (size + 1) / 2 * (i + 1));

  // Submitted by every rank but the leaver, before the leaver goes: it can never complete.
  auto orphan_tensor = HostTensor::allocate(DataType::Float32, {2});
  Handle orphan;
  if (me != leaver) orphan = allreduce_async(orphan_tensor, orphan_tensor, {ReduceOp::Sum, "orphan"});
  hvd::barrier();

  const std::string left = "rank " + std::to_string(leaver) + " has shut down";
  if (me == leaver) {
    const auto start = Clock::now();
    hvd::shutdown();
    CHECK(seconds_since(start) < 5.0);  // does not wait for the peers' programs to finish
    CHECK_FALSE(hvd::is_initialized());
    CHECK_THROWS_WITH(hvd::rank(), Catch::Contains("hvd::rank(): horovodcpp has been shut down"));
    return;
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));
  // Local queries answer as before the peer left.
  CHECK(hvd::is_initialized());
  CHECK(hvd::rank() == me);
  CHECK(hvd::size() == size);
  CHECK(hvd::local_rank() == local_rank);
  CHECK(hvd::local_size() == local_size);
  CHECK(hvd::cross_rank() == cross_rank);
  CHECK(hvd::cross_size() == cross_size);
  // So do the runtime's own snapshots (the autotune benchmark reads them after its last collective).
  CHECK(detail::controller_stats().cycles > 0);
  CHECK(detail::tuned_parameters().fusion_threshold_bytes > 0);
  // And stopping this rank's timeline, which completes a local file.
  CHECK_NOTHROW(hvd::stop_timeline());
  // The pending operation and every later collective fail naming the rank that left.
  CHECK_THROWS_WITH(orphan.wait(), Catch::Contains("shut down before ALLREDUCE of tensor 'orphan' completed") &&
                                       Catch::Contains(left));
  CHECK_THROWS_WITH(allreduce_async(t, t, {ReduceOp::Sum, "after.leaving"}),
                    Catch::Contains("hvd::allreduce: horovodcpp has stopped: " + left) &&
                        Catch::Contains("local queries"));
  CHECK_THROWS_WITH(hvd::barrier(), Catch::Contains("hvd::barrier(): horovodcpp has stopped: " + left));
  CHECK_THROWS_WITH(hvd::init(), Catch::Contains("hvd::init(): the runtime has already stopped (" + left) &&
                                     Catch::Contains("cannot be restarted"));
  // This rank's own shutdown is prompt, and ends the local queries too.
  const auto start = Clock::now();
  hvd::shutdown();
  CHECK(seconds_since(start) < 5.0);
  CHECK_FALSE(hvd::is_initialized());
  CHECK_THROWS_WITH(hvd::size(), Catch::Contains("hvd::size(): horovodcpp has been shut down"));
  CHECK_THROWS_WITH(hvd::init(), Catch::Contains("hvd::init() after hvd::shutdown() is not supported"));
}
