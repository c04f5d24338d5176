// The stall inspector, run with HOROVOD_STALL_CHECK_TIME_SECONDS=1 and (for [shutdown])
// HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=3. Rank 0's stderr is captured to read the warning.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "captured_stderr.h"
#include "test_support.h"

using namespace hvd;
using hvd::test::CapturedStderr;
using hvd::test::count_occurrences;

TEST_CASE("a late rank gets a warning naming the tensor and the missing rank", "[warning]") {
  const int late = hvd::size() - 1;
  CapturedStderr captured;
  if (hvd::rank() == late) std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  auto t = test::filled(DataType::Float32, {2}, [](std::int64_t) { return 1; });
  allreduce_async(t, t, {ReduceOp::Sum, "slow.tensor"}).wait();
  const std::string err = captured.text();
  CHECK(test::read_as_double(*t, 0) == hvd::size());
  if (hvd::rank() == 0) {
    CHECK_THAT(err, Catch::Contains("stall detected") && Catch::Contains("'slow.tensor'") &&
                        Catch::Contains("rank " + std::to_string(late)));
    // Warned once, though the inspector ran at least twice while the tensor waited.
    CHECK(count_occurrences(err, "'slow.tensor'") == 1);
    // Every line of the multi-line warning carries the rank.
    CHECK(count_occurrences(err, "[horovodcpp rank 0] [warning]") == count_occurrences(err, "\n"));
  }
}

TEST_CASE("a stall past the shutdown time fails every rank with the tensor and missing rank", "[shutdown]") {
  const int missing = hvd::size() - 1;
  auto t = HostTensor::allocate(DataType::Float32, {2});
  const auto start = std::chrono::steady_clock::now();
  if (hvd::rank() != missing) {
    CHECK_THROWS_WITH(allreduce_async(t, t, {ReduceOp::Sum, "stuck.tensor"}).wait(),
                      Catch::Contains("'stuck.tensor'") && Catch::Contains("rank " + std::to_string(missing)) &&
                          Catch::Contains("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"));
  } else {
    // The missing rank's runtime stops too: its next operation fails instead of hanging.
    while (hvd::is_initialized() && std::chrono::steady_clock::now() - start < std::chrono::seconds(20))
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    CHECK_FALSE(hvd::is_initialized());
    CHECK_THROWS_WITH(allreduce_async(t, t, {ReduceOp::Sum, "too.late"}), Catch::Contains("horovodcpp has stopped: stall shutdown"));
  }
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(15));
  // A stall shutdown is a failure: is_initialized() turns false on every rank, while the local
  // queries keep answering until hvd::shutdown().
  CHECK_FALSE(hvd::is_initialized());
  CHECK(hvd::rank() >= 0);
  CHECK_THROWS_WITH(hvd::barrier(), Catch::Contains("horovodcpp has stopped: stall shutdown"));
}

TEST_CASE("a stall of a cached tensor fails when its time is up, and says how long it waited", "[shutdown_cached]") {
  // Run with HOROVOD_STALL_CHECK_TIME_SECONDS=4 and HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=6: a
  // cached request reaches the coordinator only after 2 s; the 6 s still count from submission.
  const int missing = hvd::size() - 1;
  auto t = HostTensor::allocate(DataType::Float32, {2});
  allreduce_async(t, t, {ReduceOp::Sum, "cached.then.stuck"}).wait();  // now in the response cache
  const auto start = std::chrono::steady_clock::now();
  if (hvd::rank() != missing) {
    CHECK_THROWS_WITH(allreduce_async(t, t, {ReduceOp::Sum, "cached.then.stuck"}).wait(),
                      Catch::Contains("'cached.then.stuck'") && Catch::Contains("rank " + std::to_string(missing) + " for 6 s"));
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(took >= 5.5);
    CHECK(took < 7.5);  // it fired at 8 s (6 s after reaching the coordinator) before
  } else {
    while (hvd::is_initialized() && std::chrono::steady_clock::now() - start < std::chrono::seconds(20))
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    CHECK_FALSE(hvd::is_initialized());
  }
}
