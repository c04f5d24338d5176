// How often an idle background thread looks for another rank's cycle start (CyclePacer's
// CycleExpectation; tests/unit/test_cycle_pacer.cc checks the intervals on simulated time), at
// np>=3 with a process set {0, 1}: ranks 0 and 1 belong to every set, so every cycle that can
// complete needs a submission of theirs and they look rarely; the other ranks are left out of
// {0, 1}, whose collectives run in global cycles they must join with nothing of their own, so
// they keep looking often after each cycle. A look is a sleep of the background thread, counted
// by the kernel as a voluntary context switch.
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include <horovodcpp/horovod.h>

#include "core/introspection.h"
#include "test_support.h"

namespace {

// The voluntary context switches of this process's background thread so far.
long background_sleeps() {
  std::ifstream status("/proc/self/task/" + std::to_string(hvd::detail::background_thread_id()) + "/status");
  long sleeps = -1;
  for (std::string line; std::getline(status, line);)
    if (line.rfind("voluntary_ctxt_switches:", 0) == 0) sleeps = std::stol(line.substr(line.find(':') + 1));
  REQUIRE(sleeps >= 0);  // the thread was found
  return sleeps;
}

}  // namespace

TEST_CASE("after a cycle, a rank in every set looks rarely and a rank outside a set looks often", "[pace]") {
  REQUIRE(hvd::size() >= 3);
  hvd::ProcessSet low = hvd::add_process_set({0, 1});
  auto t = hvd::test::filled(hvd::DataType::Float32, {4}, [](std::int64_t i) { return static_cast<double>(i); });
  hvd::AllreduceOptions global;
  global.name = "pace.global";
  hvd::allreduce_async(t, t, global).wait();  // every rank leaves this cycle together
  long before = background_sleeps();
  if (low.included()) {
    hvd::AllreduceOptions in_set;
    in_set.name = "pace.low";
    in_set.process_set = low;
    hvd::allreduce_async(t, t, in_set).wait();  // a global cycle the other ranks join with nothing
    before = background_sleeps();  // only the looks after it, not the waits inside it
  }
  // Long enough for the outside ranks' looks to slow to one every 2-4 ms; ranks 0 and 1 look
  // every 8 ms.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const long looks = background_sleeps() - before;
  INFO("rank " << hvd::rank() << ": the background thread slept " << looks << " times in 300 ms");
  if (low.included()) {
    CHECK(looks >= 5);   // it still looks (for a peer's shutdown, the stall heartbeat)
    CHECK(looks <= 60);  // ~40 at one look per 8 ms; the pace after a cycle would give ~140
  } else {
    CHECK(looks >= 80);  // ~140: 20 us doubling to 1 ms, then 2 ms, then 4 ms
  }
  hvd::barrier();
  hvd::remove_process_set(low);
}
