// The watchdog's own transport, separate from negotiation: a rank whose background thread is
// stuck tells the others "I am waiting too", so each can tell frozen or dead peers (silent)
// from peers that wait with it; a rank that stops or aborts its collectives tells the others
// why. Implemented over MPI in backends/mpi (its own communicator). Used by the watchdog thread
// ("hvd-watchdog", or the thread that stopped it), except send_abort_notice; nothing waits
// longer than its stated bound.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hvd::detail {

// Another rank's report that it stopped (its executor threw), and why.
struct FailureNotice {
  int from = -1;
  std::string reason;
};

class LivenessChannel {
 public:
  virtual ~LivenessChannel() = default;
  // Tells every other rank that this rank is running and waiting (or idle); skips a rank whose previous report has
  // not been delivered yet (a frozen rank receives nothing, so nothing piles up for it).
  virtual void send_waiting() = 0;
  // The ranks whose reports arrived since the last call (a rank may appear several times).
  virtual std::vector<int> receive_reports() = 0;
  // Tells every other rank that this rank stopped and why, for a peer that may wait for it inside
  // a collective. Waits a bounded time (about a second) for the reports to leave, and up to
  // `patience` for every other rank to say it saw the report (send_failure_seen): such a peer has
  // failed its operations with this reason, so this rank may now end the collectives the peer
  // waits in without the peer losing the cause. Returns how many ranks said so.
  virtual int send_failure(const std::string& reason, std::chrono::milliseconds patience) = 0;
  // A failure report that arrived from another rank, if one did.
  virtual std::optional<FailureNotice> receive_failure() = 0;
  // Tells `rank` that this rank saw its failure report and acted on it. Bounded like send_failure.
  virtual void send_failure_seen(int rank) = 0;
  // Tells every other rank `notice` (OpContext::report_abort). Never blocks; any thread (the
  // rest of the channel is the watchdog thread's).
  virtual void send_abort_notice(const std::string& notice) = 0;
  // The notices that arrived since the last call.
  virtual std::vector<std::string> receive_abort_notices() = 0;
  // Tells `ranks` (global ranks; this rank is skipped) that this rank saw the round of process
  // set `set_id` fail, so it is not inside that set's collective (Note [A failed process set
  // stops every rank] in cycle.h). Never blocks.
  virtual void send_set_failure_seen(int set_id, const std::vector<int>& ranks) = 0;
  // (rank, set id) of each such notice that arrived since the last call.
  virtual std::vector<std::pair<int, int>> receive_set_failures_seen() = 0;
};

}  // namespace hvd::detail
