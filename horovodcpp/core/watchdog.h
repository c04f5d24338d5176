// The liveness watchdog: a thread of its own ("hvd-watchdog"), independent of negotiation, so
// a rank that stops running (SIGSTOP, stuck in a driver, swapped out, dead) cannot hang the
// others forever. While this rank's background cycle has made no progress for a while it
// reports "waiting" to the other ranks over a LivenessChannel and listens for theirs; the ranks
// it has not heard from are the ones it waits for. After `warning_seconds` it logs them; after
// `fatal_seconds` (> 0) it calls `on_fatal` with the message, once, and stops. A failure report
// from another rank (its executor threw; see Note [An exception in the executor stops every
// rank] in executor.h) calls `on_fatal`, then `on_peer_abort`, at the next tick, whether this
// rank waits or not, and is then acknowledged to its sender. A process set's failure that this rank holds is told to the
// set's other members; one that some member did not report seeing in turn, held past a grace
// period, is sent to every rank the same way (Note [A failed process set stops every rank] in
// cycle.h). Another rank's abort notice (OpContext::report_abort) reaches `on_peer_abort` at the
// next tick, and at stop(): a peer's shutdown may follow its abort closely.
// Owned by the Runtime; started after the world exists, stopped before it is finalized.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/liveness_channel.h"
#include "core/progress.h"
#include "core/settings.h"

namespace hvd::detail {

// From the stall and liveness settings; a default-constructed one holds their declared defaults.
struct WatchdogOptions {
  WatchdogOptions() : WatchdogOptions(default_settings()) {}
  // The warning follows the stall check; the fatal timeout is the shorter of a set
  // HOROVOD_STALL_SHUTDOWN_TIME_SECONDS and HOROVOD_LIVENESS_TIMEOUT_SECONDS.
  explicit WatchdogOptions(const Settings& settings);

  double warning_seconds;     // 0: no warning
  double fatal_seconds;       // 0: never fatal
  std::string fatal_setting;  // the variable that set fatal_seconds, for the message
  // How long a process set's failure that some member has not reported seeing may wait for the
  // global round that stops every rank in order before this rank tells every rank itself: that
  // round follows within a cycle or two unless a peer is blocked in a collective (Note [A failed
  // process set stops every rank] in cycle.h). Not a setting; tests shorten it.
  std::chrono::milliseconds held_failure_grace{2000};
};

class Watchdog {
 public:
  using FatalHandler = std::function<void(const std::string& message)>;
  using NoticeHandler = std::function<void(const std::string& notice)>;
  // `on_peer_abort`: another rank's abort notice (OpContext::report_abort) arrived.
  Watchdog(WatchdogOptions options, int rank, int size, LivenessChannel& channel, const Progress& progress,
           FatalHandler on_fatal, NoticeHandler on_peer_abort = {});
  ~Watchdog();
  void start();
  void stop();  // joins the thread, then hands on the abort notices that arrived; idempotent
  // Stops, then tells every other rank that this rank failed, with `reason`, and waits a few
  // ticks at most until each said it saw it (its operations failed with the reason): only then
  // may this rank end the collectives its peers wait in. Returns how many ranks said so.
  int stop(const std::string& reason);

  // How often the thread wakes: often enough for the shortest timeout, at most once a second.
  std::chrono::milliseconds tick() const { return tick_; }
  // The ranks this rank waits for: not heard from within the last few ticks (all peers when
  // every one of them reports waiting: then the ranks disagree on what they wait in).
  static std::vector<int> silent_ranks(const std::vector<std::chrono::steady_clock::time_point>& last_heard,
                                       int self, std::chrono::steady_clock::time_point now,
                                       std::chrono::steady_clock::duration fresh);
  static std::string describe_ranks(const std::vector<int>& ranks);  // "rank 1" / "ranks 1, 3"

 private:
  // "rank R stopped: <reason>" to every other rank over the liveness channel; waits up to
  // `patience` for them to say they saw it.
  int tell_every_rank(const std::string& reason, std::chrono::milliseconds patience);
  void main();
  bool check(std::chrono::steady_clock::time_point now);  // one tick; true when fatal fired
  bool check_held_failure(std::chrono::steady_clock::time_point now);  // part of check()
  void hand_on_abort_notices();  // to on_peer_abort

  WatchdogOptions options_;
  int rank_, size_;
  LivenessChannel& channel_;
  const Progress& progress_;
  FatalHandler on_fatal_;
  NoticeHandler on_peer_abort_;
  std::chrono::milliseconds tick_;
  std::chrono::steady_clock::duration report_after_;
  std::vector<std::chrono::steady_clock::time_point> last_heard_;
  std::uint64_t warned_cycle_ = ~std::uint64_t{0};
  std::set<int> told_members_;                // held sets whose members this rank told
  std::map<int, std::set<int>> seen_by_;      // set id -> the members that saw it fail

  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stopping_ = false;
};

}  // namespace hvd::detail
