// How often an idle background thread looks for another rank's cycle start (CyclePacer's
// CycleExpectation; tests/unit/test_cycle_pacer.cc checks the intervals on simulated time), at
// np>=3 with a process set {0, 1}: ranks 0 and 1 belong to every set, so every cycle that can
// complete needs a submission of theirs and they look rarely; the other ranks are left out of
// {0, 1}, whose collectives run in global cycles they must join with nothing of their own, so
// they keep looking often after each cycle. A look is a sleep of the background thread, counted
// by the kernel as a voluntary context switch.
//
// What is checked is the interval the pacer asked for, on average: the window's wall time less
// the background thread's time on a core and waiting for one (the kernel's schedstat), per
// sleep. On a loaded machine every sleep overshoots by the wait for a core, so counting sleeps
// in a fixed window measured the load as much as the pacer (the looks of the outside ranks fell
// below the bound at a load of 5 on 2 cores); the intervals asked for do not depend on it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include <horovodcpp/horovod.h>

#include "core/introspection.h"
#include "test_support.h"

namespace {

using Clock = std::chrono::steady_clock;

// The background thread's sleeps so far, and its time running and waiting for a core.
struct ThreadTimes {
  long sleeps = -1;
  std::chrono::nanoseconds running{-1}, runnable{-1};
};

ThreadTimes background_times() {
  const std::string task = "/proc/self/task/" + std::to_string(hvd::detail::background_thread_id());
  ThreadTimes t;
  std::ifstream status(task + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("voluntary_ctxt_switches:", 0) == 0) t.sleeps = std::stol(line.substr(line.find(':') + 1));
  std::ifstream schedstat(task + "/schedstat");  // ns on a core, ns waiting for one, timeslices
  long long running = -1, runnable = -1;
  schedstat >> running >> runnable;
  t.running = std::chrono::nanoseconds(running);
  t.runnable = std::chrono::nanoseconds(runnable);
  REQUIRE(t.sleeps >= 0);  // the thread was found
  REQUIRE(running >= 0);   // and the kernel keeps its scheduling times
  return t;
}

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

}  // namespace

TEST_CASE("after a cycle, a rank in every set looks rarely and a rank outside a set looks often", "[pace]") {
  REQUIRE(hvd::size() >= 3);
  hvd::ProcessSet low = hvd::add_process_set({0, 1});
  auto t = hvd::test::filled(hvd::DataType::Float32, {4}, [](std::int64_t i) { return static_cast<double>(i); });
  if (low.included()) {
    hvd::AllreduceOptions in_set;
    in_set.name = "pace.low";
    in_set.process_set = low;
    hvd::allreduce_async(t, t, in_set).wait();  // global cycles the other ranks join with nothing
  }
  hvd::AllreduceOptions global;
  global.name = "pace.global";
  hvd::allreduce_async(t, t, global).wait();  // every rank leaves this cycle together: the windows line up
  const ThreadTimes before = background_times();
  const auto start = Clock::now();
  // Long enough for the outside ranks' looks to slow to one every 2-4 ms; ranks 0 and 1 look
  // every 8 ms.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const ThreadTimes after = background_times();
  const auto window = Clock::now() - start;
  const long looks = after.sleeps - before.sleeps;
  const auto asleep = window - (after.running - before.running) - (after.runnable - before.runnable);
  const double interval_ms = ms(asleep) / std::max(looks, 1L);
  INFO("rank " << hvd::rank() << ": the background thread slept " << looks << " times in " << ms(window)
               << " ms, waited " << ms(after.runnable - before.runnable) << " ms for a core: " << interval_ms
               << " ms asked per sleep");
  if (low.included()) {
    CHECK(looks >= 5);  // it still looks (for a peer's shutdown, the stall heartbeat)
    CHECK(interval_ms >= 4.5);  // 8 ms; the pace after a cycle asks ~2 ms
  } else {
    CHECK(looks >= 10);
    CHECK(interval_ms <= 4.0);  // ~2 ms: 20 us doubling to 1 ms, then 2 ms, then 4 ms (8 ms when idle)
  }
  // A rank whose window ended first must not start a cycle (the barrier's) inside the window of
  // a rank that woke later: the waits inside a cycle are sleeps too.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  hvd::barrier();
  hvd::remove_process_set(low);
}
