// Whether the background thread is inside a background cycle (negotiation and collectives,
// which need every rank) and since when. Written by the background thread, read by the
// watchdog thread; lock-free, except the rare held failure. Owned by the Runtime.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

namespace hvd::detail {

class Progress {
 public:
  using Clock = std::chrono::steady_clock;
  void enter_cycle(std::uint64_t cycle) {
    cycle_.store(cycle, std::memory_order_relaxed);
    since_.store(Clock::now().time_since_epoch().count(), std::memory_order_release);
  }
  // Waiting for the next cycle or idle: waiting there is not a lack of progress.
  void leave_cycle() { since_.store(0, std::memory_order_release); }
  // How long the current cycle has lasted; zero when none is running.
  Clock::duration in_cycle_for(Clock::time_point now) const {
    const auto since = since_.load(std::memory_order_acquire);
    if (since == 0) return Clock::duration::zero();
    return now - Clock::time_point(Clock::duration(since));
  }
  std::uint64_t cycle() const { return cycle_.load(std::memory_order_relaxed); }

  // A process set's round failed here and the failure waits for the next global round, which
  // the watchdog gives a grace period (Note [A failed process set stops every rank], cycle.h).
  // The first one is kept.
  void hold_failure(const std::string& reason) {
    std::lock_guard<std::mutex> lock(held_mutex_);
    if (!held_) held_.emplace(reason, Clock::now());
  }
  // The held failure and since when, if any.
  std::optional<std::pair<std::string, Clock::time_point>> held_failure() const {
    std::lock_guard<std::mutex> lock(held_mutex_);
    return held_;
  }

 private:
  std::atomic<Clock::rep> since_{0};
  std::atomic<std::uint64_t> cycle_{0};
  mutable std::mutex held_mutex_;
  std::optional<std::pair<std::string, Clock::time_point>> held_;
};

}  // namespace hvd::detail
