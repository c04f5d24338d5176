#include "core/cycle_pacer.h"

#include <algorithm>
#include <thread>

#include "core/blocked_callers.h"

namespace hvd::detail {

CyclePacer::CyclePacer(ControlChannel& channel, Progress* progress, Options options)
    : channel_(channel), progress_(progress), options_(std::move(options)) {}

void CyclePacer::sleep(std::chrono::microseconds interval) const {
  if (options_.sleep)
    options_.sleep(interval);
  else
    std::this_thread::sleep_for(interval);
}

void CyclePacer::wait_for_start(Demand& demand) {
  expecting_.reset();
  expecting_since_ = now();
  if (channel_.rank() == 0) {
    while (!wants_cycle(demand, next_interval(demand)) && !channel_.start_arrived()) {
    }
    channel_.announce_start();
  } else {
    while (!channel_.start_arrived()) {
      if (wants_cycle(demand, next_interval(demand))) {
        channel_.ask_to_start();
        wait_for_answer();
        break;
      }
    }
  }
  ++cycles_started_;
  last_start_ = now();
}

// A rank wants the next cycle for submissions that are due (SettleWindow), a wish to stop, or,
// while anything is in flight, the heartbeat.
bool CyclePacer::wants_cycle(Demand& demand, std::chrono::microseconds timeout) {
  bool want = demand.stop_wanted();
  if (!want) {
    const bool busy = demand.busy();
    const auto heartbeat = last_start_ + kBusyHeartbeat;
    auto deadline = now() + timeout;
    if (busy) deadline = std::min(deadline, heartbeat);
    want = demand.wait_until_due(deadline) || (busy && now() >= heartbeat);
  }
  // From here on the ranks must start together: waiting for that is watched.
  if (want && progress_ != nullptr) progress_->enter_cycle(cycles_started_ + 1);
  return want;
}

// A rank in every set submits to every collective it takes part in, and its own submission
// starts (or joins) the cycle that completes it; only a rank left out of some set is needed in
// cycles it brings nothing to. A joined rank has its join request out, so it awaits the others.
// Submissions held by the settle window (a leading rank, a burst settling) join the cycle of
// whichever rank starts first: worth looking for often while a user thread waits for them.
CycleExpectation CyclePacer::expectation(Demand& demand, bool caller_blocked) {
  if (demand.awaiting_others()) return CycleExpectation::PeersDue;
  if (demand.holds_submissions()) return caller_blocked ? CycleExpectation::PeersDue : CycleExpectation::MayBeNeeded;
  if (demand.left_out_of_a_set()) return CycleExpectation::MayBeNeeded;
  return CycleExpectation::OwnWorkFirst;
}

std::chrono::microseconds CyclePacer::next_interval(Demand& demand) {
  CycleExpectation expecting = expectation(demand, BlockedCallers::any());
  // With more ranks than cores, each look would take time from a rank that is still computing.
  if (expecting == CycleExpectation::PeersDue && options_.oversubscribed) expecting = CycleExpectation::MayBeNeeded;
  const auto at = now();
  if (expecting_ != expecting) {
    expecting_ = expecting;
    expecting_since_ = at;
  }
  return look_interval(at - expecting_since_, expecting);
}

// How long a waiting rank sleeps between looks for another rank's cycle start. Local work never
// waits for this: the wait for it wakes at once. Each look wakes the background thread on a core
// that training is using and costs the rank CPU time: looking at the MayBeNeeded ramp below all
// through a step, as every rank did before OwnWorkFirst, took more of a core and preempted the
// training thread nearly three times as often (docs/benchmarks.md, "Figures behind design
// choices").
//
// - PeersDue: the others' request is due within milliseconds (this rank finished its backward
//   pass first), and at the idle pace it would be noticed 1-2 ms late. So the rank looks every
//   100 us for the first 200 ms of such a wait, on a core that has nothing else to do then: the
//   reduced values arrive sooner after the last rank's last gradient (docs/benchmarks.md,
//   "Figures behind design choices").
// - MayBeNeeded: short right after a cycle (the members of a set this rank is not in submit
//   close together), longer the longer nothing happens.
// - OwnWorkFirst: a cycle another rank starts can complete nothing before this rank submits, and
//   its submission wakes it, so only the rare reasons are looked for, at the longest interval.
std::chrono::microseconds CyclePacer::look_interval(Clock::duration waited, CycleExpectation expecting) {
  using std::chrono::microseconds;
  using std::chrono::milliseconds;
  constexpr microseconds kLongest(8000);
  if (expecting == CycleExpectation::OwnWorkFirst) return kLongest;
  microseconds cap = kLongest;
  if (expecting == CycleExpectation::PeersDue && waited < milliseconds(200))
    cap = microseconds(100);
  else if (waited < milliseconds(20))
    cap = microseconds(1000);
  else if (waited < milliseconds(200))
    cap = microseconds(2000);
  else if (waited < milliseconds(1000))
    cap = microseconds(4000);
  const auto half = std::chrono::duration_cast<microseconds>(waited) / 2;
  return std::clamp(half, microseconds(20), cap);
}

// The coordinator answers a request within its look interval, or, when it expects its own work
// first, once that work arrives. While a user thread waits for the result, this rank is ahead of
// the others as in PeersDue, and looking often pays, on a core that has nothing else to do
// (see Note [Polling while a caller is blocked]); otherwise (gradients submitted during backward,
// more ranks than cores) the channel's usual sleeping wait.
void CyclePacer::wait_for_answer() {
  if (options_.oversubscribed || !BlockedCallers::any()) return channel_.await_start();
  const auto poll_until = now() + kPollWhileBlocked;
  do {
    if (channel_.start_arrived()) return;
  } while (BlockedCallers::any() && now() < poll_until);
  const auto asked = now();
  while (!channel_.start_arrived()) sleep(look_interval(now() - asked, CycleExpectation::PeersDue));
}

}  // namespace hvd::detail
