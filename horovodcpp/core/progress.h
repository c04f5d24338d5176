// Whether the background thread is inside a background cycle (negotiation and collectives,
// which need every rank) and since when. Written by the background thread, read by the
// watchdog thread; lock-free. Owned by the Runtime.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

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

 private:
  std::atomic<Clock::rep> since_{0};
  std::atomic<std::uint64_t> cycle_{0};
};

}  // namespace hvd::detail
