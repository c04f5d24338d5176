// When the requests waiting on this rank should start a negotiation cycle. Cycles start on work,
// not on a timer, but a training step submits its gradients one after another: starting at the
// first of them would split the burst into many small cycles and collectives. So a cycle waits
// until submissions have been quiet for a gap, or until HOROVOD_CYCLE_TIME has passed since the
// first waiting one (a burst that keeps streaming still starts a cycle per cycle time).
//
// The gap is measured, not fixed: eight times the running average of the intervals between
// submissions that arrived while earlier ones were still in flight (a burst). A rank that only
// makes one synchronous call at a time never sees such an interval, so its gap stays zero and a
// lone tensor starts its cycle at once.
//
// A rank that leads (its recent cycles found what it submitted not yet submitted by others, more
// often than chance) holds every start for the longest hold: the last rank to submit starts the cycle that can
// release the tensors, and this rank's waiting submissions join it, so starting early would only
// add a cycle that releases nothing.
//
// A thread that submits a known set in a row says where it ends (hvd::SubmissionBatch): the set
// is held while it is submitted and due as soon as it is complete, with no gap to wait out.
// Not thread-safe: the TensorQueue calls it under its lock.
#pragma once

#include <chrono>

namespace hvd::detail {

class SettleWindow {
 public:
  using Clock = std::chrono::steady_clock;
  explicit SettleWindow(Clock::duration longest_hold) : longest_hold_(longest_hold) {}

  // A submission arrived at `now`; `burst` says whether earlier submissions were still in flight.
  void on_arrival(Clock::time_point now, bool burst);
  // The waiting submissions were taken for a cycle.
  void on_cycle_start() {
    waiting_ = false;
    announced_ = false;
  }
  // A batch of submissions ended (hvd::SubmissionBatch): what waits is due now, unless this
  // rank leads. While batches are open, what waits is held up to the longest hold.
  void on_announce(Clock::time_point now) {
    announced_ = true;
    announced_at_ = now;
  }
  void set_batches_open(int open) { batches_open_ = open; }
  // When the waiting submissions should start a cycle (meaningful while some are waiting).
  Clock::time_point due() const;
  // The current quiet gap: eight average burst intervals, at most the longest hold.
  Clock::duration gap() const;
  Clock::duration longest_hold() const { return longest_hold_; }
  void set_longest_hold(Clock::duration hold) { longest_hold_ = hold; }
  // After a cycle that took fresh submissions of this rank: whether some were still missing on
  // other ranks. A moving average of these says whether this rank leads.
  void record_start(bool ahead_of_others);
  // Leading: ahead more often than a random arrival order makes a rank, which is (n-1)/n of the
  // cycles with n ranks; the bar sits halfway from there to always, 1 - 1/(2n).
  bool leading() const { return ahead_share_ > 1.0 - 1.0 / (2.0 * ranks_); }
  void set_ranks(int ranks) { ranks_ = ranks; }

 private:
  Clock::duration longest_hold_;
  double average_interval_ns_ = 0;  // exponential moving average of burst intervals
  double ahead_share_ = 0;          // moving average of record_start(true)
  int ranks_ = 2;
  int batches_open_ = 0;
  bool waiting_ = false, announced_ = false;
  Clock::time_point first_waiting_{}, last_arrival_{}, announced_at_{};
};

}  // namespace hvd::detail
