// Runs what a round agreed, in the agreed order: takes each response's entries from the queue
// (zeros in place of a joined rank's), picks the op (OpRegistry) and runs it on the round's
// process set's communicator, and completes the handles. Two kinds of response never reach an
// op: a join completes the rank's join(), and the global set's reserved barriers add and remove
// process sets (every rank runs them at the same point of the same cycle, so the collective
// creation of a set's communicators lines up). Background thread, except finish() (any thread:
// ops that complete later call it through OpContext). Owned by the Runtime.
//
// Note [An exception in the executor stops every rank]
// An op reports a failure it can recover from as a Status, at a point every rank reaches alike
// (an MPI error, a size beyond MPI's counts). An exception (an output allocator out of memory, a
// backend that throws) leaves the response at an unknown point on this rank alone: the others may
// already wait inside its collective, and a later collective this rank issued on the same
// communicator could be matched with theirs (wrong data). So this rank runs nothing more: its
// queue refuses new submissions, then the response's tensors fail here with the reason (in that
// order: a caller woken by the failure must find the job stopped), the rank stops (Cycle,
// Runtime), and its watchdog tells every other rank over the liveness channel, whose watchdogs
// end their collectives with it. No negotiation round reaches a rank blocked inside a
// collective; the liveness channel does. Once each peer said it saw the report (or a few
// watchdog ticks passed), the rank's backends end their side without waiting for the peers
// (Backend::shutdown(WorldEnd::Abandon): NCCL communicators are aborted, not finalized), so the
// job ends within seconds, and a peer's NCCL error from that abort comes after its operations
// already failed with the reason.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/message.h"
#include "core/op_registry.h"
#include "core/process_set_table.h"
#include "core/settings.h"
#include "core/status.h"
#include "core/tensor_queue.h"
#include "core/world.h"
#include "timeline/timeline.h"

namespace hvd::detail {

class Executor {
 public:
  // Each part outlives the Executor. `abandoned`: the watchdog gave up on the background thread,
  // which then touches nothing more.
  Executor(const Settings& settings, int rank, TensorQueue& queue, const OpRegistry& registry, Timeline& timeline,
           ProcessSetTable& sets, World& world, const std::vector<std::unique_ptr<Backend>>& backends,
           ControllerFactory make_controller, const std::atomic<bool>& abandoned);

  // One round's responses in `set`, in order: every tensor's op opens with its QUEUE phase (the
  // wait behind earlier responses), then each response runs. False when abandoned midway, or
  // when a response threw: then `failure` names it and why, its tensors failed with that, and
  // nothing more ran. See Note [An exception in the executor stops every rank].
  bool run(const ResponseList& list, ProcessSetState& set, std::string* failure);
  // Completes the entries' handles with `status` and ends their ops in the timeline. Any thread.
  void finish(std::vector<TensorTableEntry>& entries, const Status& status);
  // The runtime stopped: refuses further submissions and fails every entry still in flight.
  void abort_pending(const std::string& reason);

 private:
  // Runs one response. `entries` (cleared first) holds what it took from the queue, so that
  // run() can fail them when the response throws.
  void execute(const Response& response, ProcessSetState& set, std::vector<TensorTableEntry>& entries);
  // Appends this rank's entries for the response's names, in order.
  void entries_for(const Response& response, ProcessSetState& set, std::vector<TensorTableEntry>& entries);
  // Process-set changes (the global set's reserved barriers).
  void change_process_sets(const Response& response, std::vector<TensorTableEntry>& entries);
  Status add_process_set(const Response& response, int* id);
  Status remove_process_set(const Response& response);

  const Settings& settings_;
  int rank_;
  TensorQueue& queue_;
  const OpRegistry& registry_;
  Timeline& timeline_;
  ProcessSetTable& sets_;
  World& world_;
  const std::vector<std::unique_ptr<Backend>>& backends_;
  ControllerFactory make_controller_;
  const std::atomic<bool>& abandoned_;
};

// Whether a response is one of the global set's reserved add/remove barriers.
bool is_process_set_change(const Response& response);

}  // namespace hvd::detail
