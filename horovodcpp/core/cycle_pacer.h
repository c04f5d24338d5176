// When this rank looks for the next cycle and when it asks for one: the cycle-start policy, over
// the mechanism of the global set's ControlChannel (a start arrived? ask to start; announce it).
// There is no timer: a cycle runs only when some rank has work. Between two cycles every rank
// waits in wait_for_start(); the coordinator (rank 0) starts the next cycle when it wants one
// itself or when another rank asked, and its start reaches every rank. A rank that is asked by
// another joins the cycle without wanting one itself.
//
// A rank wants a cycle when its submissions are due (TensorQueue's SettleWindow), when it must
// stop, or, while anything of it is in flight, as a heartbeat. Between looks for another rank's
// start it sleeps (inside the Demand's wait, which local work ends at once) for an interval set
// by what it expects (CycleExpectation) and how long it has expected it.
// Background thread only; owned by the Runtime.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>

#include "core/control_channel.h"
#include "core/progress.h"

namespace hvd::detail {

// What a rank waiting for the next cycle expects from the others, which sets how often it looks
// for another rank's request (each look wakes its background thread and takes a core from
// training for tens of microseconds).
enum class CycleExpectation {
  // This rank's submissions already wait on other ranks' (it is ahead of them), or wait here to
  // join the cycle of the last rank to submit while a user thread waits for them: that cycle
  // is due soon and worth looking for often.
  PeersDue,
  // Other ranks may start cycles that this rank brings nothing to and still must join (the
  // global cycles behind a process set this rank is not in), or this rank holds submissions
  // while its threads compute (a burst settling during backward).
  MayBeNeeded,
  // Every collective that can complete needs a submission of this rank, and a submission wakes
  // it at once: a cycle another rank starts earlier can wait for it. Looks are for rare events
  // only (a peer's shutdown, the stall inspector's heartbeat).
  OwnWorkFirst,
};

struct CyclePacerOptions {
  // More ranks on this host than cores: a rank that looked often would take the core of the rank
  // it waits for (see ranks_outnumber_cores in background_placement.h).
  bool oversubscribed = false;
  // Time, for tests that drive it; steady_clock and sleep_for when unset.
  std::function<std::chrono::steady_clock::time_point()> now;
  std::function<void(std::chrono::microseconds)> sleep;
};

class CyclePacer {
 public:
  using Options = CyclePacerOptions;
  using Clock = std::chrono::steady_clock;

  // What the pacer asks about this rank before each look (the Cycle answers from its queue and
  // process sets; tests script it). Background thread.
  class Demand {
   public:
    virtual ~Demand() = default;
    // Blocks until this rank's submissions are due to start a cycle (true), or until `deadline`
    // (false); returns false early when submissions arrived that are not due yet.
    virtual bool wait_until_due(Clock::time_point deadline) = 0;
    // This rank must tell the others at once: hvd::shutdown() was called, or a set failed.
    virtual bool stop_wanted() = 0;
    // Something of this rank is in flight in some set.
    virtual bool busy() = 0;
    // The facts expectation() reads, each only when the ones before it are false:
    virtual bool awaiting_others() = 0;     // its submissions wait on other ranks'
    virtual bool holds_submissions() = 0;   // submissions wait here for a cycle to start
    virtual bool left_out_of_a_set() = 0;   // some registered set leaves this rank out
  };

  // `progress` (may be null) learns when this rank starts waiting for the others to start.
  CyclePacer(ControlChannel& channel, Progress* progress, Options options = {});

  // Blocks until the next cycle starts on every rank (collective over the channel's ranks).
  // Throws when the channel fails.
  void wait_for_start(Demand& demand);
  // When the last wait_for_start() returned.
  Clock::time_point last_start() const { return last_start_; }

  // The policy as functions of their inputs, for tests.
  // What this rank expects, from the Demand's facts and whether a user thread is blocked on a
  // result (BlockedCallers).
  static CycleExpectation expectation(Demand& demand, bool caller_blocked);
  // How long to sleep before the next look, having expected `expecting` for `waited`.
  static std::chrono::microseconds look_interval(Clock::duration waited, CycleExpectation expecting);
  // While anything is in flight, a rank starts a cycle at least this often without news, so the
  // stall inspector and the check for stalled cached tensors keep running.
  static constexpr std::chrono::milliseconds kBusyHeartbeat{100};

 private:
  Clock::time_point now() const { return options_.now ? options_.now() : Clock::now(); }
  void sleep(std::chrono::microseconds interval) const;
  // Whether this rank wants the next cycle, waiting up to `timeout` for a reason.
  bool wants_cycle(Demand& demand, std::chrono::microseconds timeout);
  // The next look's interval, from what this rank expects now and since when it expects it.
  std::chrono::microseconds next_interval(Demand& demand);
  // A rank other than the coordinator that asked: waits for the coordinator's start.
  void wait_for_answer();

  ControlChannel& channel_;
  Progress* progress_;
  Options options_;
  std::uint64_t cycles_started_ = 0;
  Clock::time_point last_start_{};
  // The expectation of the current wait and since when it holds (reset by every wait).
  std::optional<CycleExpectation> expecting_;
  Clock::time_point expecting_since_{};
};

}  // namespace hvd::detail
