#include "core/settle_window.h"

#include <algorithm>

namespace hvd::detail {
namespace {
// Weight of a new sample in the moving averages: they follow a change of workload within a few
// steps' worth of submissions, and one late tensor does not swing them.
constexpr double kNewIntervalWeight = 1.0 / 8;
// The gap in average intervals. Intervals inside a burst scatter (allocation, preemption): were
// they exponential, a gap of k averages would cut a burst after any one interval with chance
// e^-k, so 8 (0.03%) keeps a 200-tensor burst in one cycle almost always, where 2 (14%) split it
// dozens of times. A gap past the longest hold is capped by it.
constexpr double kGapPerAverageInterval = 8;
}  // namespace

void SettleWindow::on_arrival(Clock::time_point now, bool burst) {
  const auto interval = now - last_arrival_;
  // Intervals longer than the longest hold would never be waited for anyway: not a burst.
  if (burst && last_arrival_ != Clock::time_point{} && interval < longest_hold_) {
    const double ns = static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(interval).count());
    average_interval_ns_ += kNewIntervalWeight * (ns - average_interval_ns_);
  }
  last_arrival_ = now;
  if (!waiting_) first_waiting_ = now;
  waiting_ = true;
}

SettleWindow::Clock::duration SettleWindow::gap() const {
  const auto gap = std::chrono::duration_cast<Clock::duration>(
      std::chrono::nanoseconds(static_cast<long long>(kGapPerAverageInterval * average_interval_ns_)));
  return std::min(gap, longest_hold_);
}

SettleWindow::Clock::time_point SettleWindow::due() const {
  if (leading()) return first_waiting_ + longest_hold_;
  if (announced_) return std::min(announced_at_, first_waiting_ + longest_hold_);
  if (batches_open_ > 0) return first_waiting_ + longest_hold_;
  return std::min(last_arrival_ + gap(), first_waiting_ + longest_hold_);
}

void SettleWindow::record_start(bool ahead_of_others) {
  ahead_share_ += kNewIntervalWeight * ((ahead_of_others ? 1.0 : 0.0) - ahead_share_);
}

}  // namespace hvd::detail
