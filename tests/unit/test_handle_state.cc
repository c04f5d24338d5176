// HandleState completes in two halves (record_entry, then wake) so that the background thread
// can finish a whole fused response before it wakes anyone: the record must complete the handle
// exactly at its last entry, and a waiter must stay blocked until then.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "core/handle_state.h"

using hvd::detail::HandleState;
using hvd::detail::Status;
using Clock = std::chrono::steady_clock;

TEST_CASE("record_entry completes a handle at its last entry only, once", "[handle_state]") {
  HandleState state(3);
  CHECK_FALSE(state.record_entry(0, Status::ok(), nullptr));
  CHECK_FALSE(state.record_entry(1, Status::error("entry 1 failed"), nullptr));
  CHECK_FALSE(state.done());
  CHECK(state.record_entry(2, Status::error("entry 2 failed"), nullptr));
  CHECK(state.done());
  CHECK_FALSE(state.record_entry(2, Status::ok(), nullptr));  // completed already: nobody wakes twice
  CHECK(state.status.message() == "entry 1 failed");         // the first failure wins
}

TEST_CASE("a waiter stays blocked until the last entry is recorded, and wake releases it", "[handle_state]") {
  HandleState state(2);
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    state.wait();
    returned = true;
  });
  state.record_entry(0, Status::ok(), nullptr);
  state.wake();  // a wake before completion: the waiter checks and blocks again
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK_FALSE(returned.load());
  if (state.record_entry(1, Status::ok(), nullptr)) state.wake();
  const auto limit = Clock::now() + std::chrono::seconds(2);
  while (!returned.load() && Clock::now() < limit) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(returned.load());
  if (!returned.load()) state.fail_all(Status::error("test gave up"));  // so the join cannot hang
  waiter.join();
}
