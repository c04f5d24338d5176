// BlockedCallers counts exactly the user threads blocked in a handle's wait: the MPI channel
// polls instead of sleeping only while one is, so a count that stayed up would spin the
// background thread through training, and one that never rose would keep synchronous calls slow.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "core/blocked_callers.h"
#include "core/handle_state.h"

using hvd::detail::BlockedCallers;
using hvd::detail::HandleState;
using Clock = std::chrono::steady_clock;

namespace {

// Whether `condition` became true within two seconds.
template <typename Condition>
bool within_two_seconds(Condition condition) {
  const auto limit = Clock::now() + std::chrono::seconds(2);
  while (!condition()) {
    if (Clock::now() > limit) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

}  // namespace

TEST_CASE("BlockedCallers counts a thread only while it is blocked in HandleState::wait", "[blocked_callers]") {
  REQUIRE_FALSE(BlockedCallers::any());
  HandleState state(2);
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    state.wait();
    returned = true;
  });
  CHECK(within_two_seconds([] { return BlockedCallers::any(); }));  // CHECK: the threads are joined below either way
  state.complete_entry(0, hvd::detail::Status::ok(), nullptr);
  // One entry still pending: the waiter is still blocked, and still counted.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK_FALSE(returned.load());
  CHECK(BlockedCallers::any());
  state.complete_entry(1, hvd::detail::Status::ok(), nullptr);
  waiter.join();
  CHECK(returned.load());
  CHECK_FALSE(BlockedCallers::any());
}

TEST_CASE("BlockedCallers does not count a wait on a handle that is already done", "[blocked_callers]") {
  HandleState state(1);
  state.complete_entry(0, hvd::detail::Status::ok(), nullptr);
  std::atomic<bool> seen{false};
  std::atomic<bool> stop{false};
  std::thread watcher([&] {
    while (!stop) seen = seen || BlockedCallers::any();
  });
  for (int i = 0; i < 1000; ++i) state.wait();
  stop = true;
  watcher.join();
  CHECK_FALSE(seen.load());
}

TEST_CASE("BlockedCallers counts several blocked threads until the last one leaves", "[blocked_callers]") {
  HandleState first(1), second(1);
  std::thread b([&] { second.wait(); });
  CHECK(within_two_seconds([] { return BlockedCallers::any(); }));  // CHECK: the threads are joined below either way
  std::thread a([&] { first.wait(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a blocks too (or returns at once below)
  first.fail_all(hvd::detail::Status::error("test failure"));
  a.join();
  CHECK(BlockedCallers::any());  // b is still blocked: a's leaving must not clear it
  second.complete_entry(0, hvd::detail::Status::ok(), nullptr);
  b.join();
  CHECK_FALSE(BlockedCallers::any());
}
