// BackgroundPlacement moves the background thread onto the core of a user thread blocked on a
// result, only when enabled and only while one is blocked; the user thread is never moved.
#include <catch2/catch.hpp>

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "core/background_placement.h"
#include "core/blocked_callers.h"
#include "core/handle_state.h"

using hvd::detail::BackgroundPlacement;
using hvd::detail::BlockedCallers;
using hvd::detail::HandleState;
using hvd::detail::Status;
using Clock = std::chrono::steady_clock;

namespace {

cpu_set_t thread_affinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  pthread_getaffinity_np(pthread_self(), sizeof(set), &set);
  return set;
}

// The highest core this process may use, or -1.
int last_allowed_core() {
  cpu_set_t set = thread_affinity();
  for (int c = CPU_SETSIZE - 1; c >= 0; --c)
    if (CPU_ISSET(c, &set)) return c;
  return -1;
}

// Runs `body` on a fresh thread while another thread, kept on `core`, is blocked on a handle.
template <typename Body>
void while_caller_blocked_on(int core, Body body) {
  HandleState state(1);
  std::thread caller([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(core, &one);
    pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
    state.wait();
  });
  const auto limit = Clock::now() + std::chrono::seconds(2);
  while (!BlockedCallers::any() && Clock::now() < limit) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  REQUIRE(BlockedCallers::any());
  std::thread background(body);
  background.join();
  state.complete_entry(0, Status::ok(), nullptr);
  caller.join();
}

}  // namespace

TEST_CASE("cores are full when the local ranks are at least the usable cores", "[placement]") {
  const cpu_set_t set = thread_affinity();
  const int usable = CPU_COUNT(&set);
  REQUIRE(usable >= 1);
  CHECK(BackgroundPlacement::cores_full(usable));
  CHECK(BackgroundPlacement::cores_full(usable + 1));
  if (usable > 1) CHECK_FALSE(BackgroundPlacement::cores_full(usable - 1));
}

TEST_CASE("the background thread follows a blocked caller's core, only when enabled", "[placement]") {
  const int core = last_allowed_core();
  const cpu_set_t all = thread_affinity();
  if (CPU_COUNT(&all) < 2) {
    WARN("one usable core: following cannot be told from staying; skipped");
    return;
  }
  // Nobody blocked: nothing moves.
  std::thread([&] {
    BackgroundPlacement placement(true);
    CHECK(placement.follow_blocked_caller() == -1);
    cpu_set_t now = thread_affinity();
    CHECK(CPU_EQUAL(&now, &all));
  }).join();
  // Disabled (the host's cores are not full): nothing moves either.
  while_caller_blocked_on(core, [&] {
    BackgroundPlacement placement(false);
    CHECK(placement.follow_blocked_caller() == -1);
    cpu_set_t now = thread_affinity();
    CHECK(CPU_EQUAL(&now, &all));
  });
  // Enabled: kept on the caller's core, and a second call while still there does nothing.
  while_caller_blocked_on(core, [&] {
    BackgroundPlacement placement(true);
    CHECK(BlockedCallers::last_cpu() == core);
    CHECK(placement.follow_blocked_caller() == core);
    cpu_set_t now = thread_affinity();
    CHECK(CPU_COUNT(&now) == 1);
    CHECK(CPU_ISSET(core, &now));
    CHECK(placement.follow_blocked_caller() == -1);
  });
}
