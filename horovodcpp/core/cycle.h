// One background cycle on this rank, after the CyclePacer saw it start on every rank: the
// requests submitted since the last cycle are popped, then every process set this rank belongs
// to runs one round, by ascending id (the global set first; the same order on every member, so
// the sets' blocking rounds cannot wait on each other): its Controller negotiates what is ready
// on all of the set's ranks, and the Executor runs it. Every set takes the same path; the global
// set is the one every rank is in, so its round also carries this rank's wish to stop (or a
// set's failure, with its reason) to every rank, and a stop it agrees on ends the cycle there.
//
// Note [A failed process set stops every rank]
// A process set's round can fail on its members only: its control channel reports an error
// (every member sees it in the same round), or its coordinator finds a corrupt list or a stall
// past the shutdown time. Members that stopped on their own would leave every other rank waiting
// for them in the next cycle (until the liveness timeout), and members of their later sets
// waiting in this one. So they finish the cycle and bring the failure to the next global round,
// where every rank agrees to stop and receives the same text, the failing ranks' reasons (each
// distinct one once, in rank order: two sets may fail in one cycle; Controller, step 5): every
// rank's pending and later operations fail with it. A failure of the global round itself
// reaches every rank there. No round reaches a rank that waits inside a collective: a set's
// failure may be one member's alone (its control channel failed there only) while the others
// went on into the set's collective. So every failure is also held for this rank's watchdog
// (Progress::hold_failure), which tells the set's other members that it saw it (the liveness
// channel): a member that saw it is not inside the set's collective. When some member has not
// said so and no global round has stopped every rank within a grace period (such a round follows
// within a cycle or two otherwise), the watchdog sends the failure over the liveness channel as
// a rank whose executor threw does (Note [An exception in the executor stops every rank] in
// executor.h) and ends this rank's collectives; each rank stops with the reason of whichever
// path reaches it first. When every member saw it, nobody waits in the set's collective and the
// global round comes, however late (a member busy in another set's long collective): no grace
// then. The round goes first because it stops every rank in order: a rank whose watchdog ended
// its collectives cannot finalize MPI. A rank that froze or died is found by the others' silence
// (the liveness timeout).
// Between cycles the Cycle answers the pacer's questions (CyclePacer::Demand).
// Background thread only, except stats(); owned by the Runtime.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/background_placement.h"
#include "core/cycle_pacer.h"
#include "core/executor.h"
#include "core/process_set_table.h"
#include "core/progress.h"
#include "core/tensor_queue.h"
#include "timeline/timeline.h"

namespace hvd::detail {

enum class StopKind {
  Requested,  // this rank called hvd::shutdown()
  PeerLeft,   // another rank shut down
  Failed,     // a stall, a lost peer, a failed negotiation
  // This rank's executor threw: the others may wait for it inside a collective, where no round
  // reaches them (see Note [An exception in the executor stops every rank] in executor.h).
  FailedAlone,
};

class Cycle final : public CyclePacer::Demand {
 public:
  struct Stop {
    StopKind kind;
    std::string reason;
  };
  // What one cycle did, for the Runtime.
  struct Report {
    std::chrono::steady_clock::time_point started;
    bool ran = false;           // every round ran, or the global one agreed to stop
    ResponseList global;        // the global set's round (autotune measures it)
    std::optional<Stop> stop;   // the runtime must stop now
  };

  // Each part outlives the Cycle. `stop_requested`: hvd::shutdown() was called on this rank.
  // `abandoned`: the watchdog gave up on the background thread, which then touches nothing more.
  Cycle(int rank, TensorQueue& queue, ProcessSetTable& sets, Executor& executor, Timeline& timeline,
        Progress& progress, BackgroundPlacement placement, const std::atomic<bool>& stop_requested,
        const std::atomic<bool>& abandoned);

  // Runs one cycle. Collective: every rank runs it after the same start.
  Report run();
  // The global set's counters as of the last cycle. Any thread.
  ControllerStats stats() const;

  // CyclePacer::Demand.
  bool wait_until_due(std::chrono::steady_clock::time_point deadline) override;
  bool stop_wanted() override;
  bool busy() override;
  bool awaiting_others() override;
  bool holds_submissions() override;
  bool left_out_of_a_set() override;

 private:
  enum class Round {
    Next,   // go on with the next set
    Last,   // every rank agreed to stop: the cycle ends here, on every rank
    Abort,  // this rank failed, or was abandoned: nothing more runs (`report.stop` says why)
  };
  // One set's round: negotiate, then execute.
  Round run_round(ProcessSetState& set, std::vector<Request> requests, Report& report);
  void hold_set_failure(const ProcessSetState& set, const std::string& reason);
  std::string describe_round(const ProcessSetState& set, const ResponseList& list) const;
  std::string describe_shutdown(const ResponseList& list) const;

  int rank_;
  TensorQueue& queue_;
  ProcessSetTable& sets_;
  Executor& executor_;
  Timeline& timeline_;
  Progress& progress_;
  BackgroundPlacement placement_;
  const std::atomic<bool>& stop_requested_;
  const std::atomic<bool>& abandoned_;
  std::string set_failure_;  // a set's round failed here: the next global round stops every rank with it

  mutable std::mutex stats_mutex_;
  ControllerStats stats_;  // published once per cycle
};

}  // namespace hvd::detail
