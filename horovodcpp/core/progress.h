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
#include <vector>

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
  // the watchdog gives a grace period unless every member of the set saw the failure too (Note
  // [A failed process set stops every rank], cycle.h). Each failed set is held; the first
  // reason is kept.
  struct HeldSet {
    int id;
    std::vector<int> ranks;  // global ranks
    Clock::time_point since;
  };
  struct HeldFailures {
    std::string reason;
    std::vector<HeldSet> sets;
  };
  void hold_failure(int set_id, const std::vector<int>& ranks, const std::string& reason) {
    std::lock_guard<std::mutex> lock(held_mutex_);
    if (!held_) held_.emplace(HeldFailures{reason, {}});
    held_->sets.push_back({set_id, ranks, Clock::now()});
  }
  // The held failures, if any.
  std::optional<HeldFailures> held_failures() const {
    std::lock_guard<std::mutex> lock(held_mutex_);
    return held_;
  }
  bool holds_failure() const {
    std::lock_guard<std::mutex> lock(held_mutex_);
    return held_.has_value();
  }

 private:
  std::atomic<Clock::rep> since_{0};
  std::atomic<std::uint64_t> cycle_{0};
  mutable std::mutex held_mutex_;
  std::optional<HeldFailures> held_;
};

}  // namespace hvd::detail
