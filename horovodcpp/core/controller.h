// Decides, once per background cycle, which tensors are ready on every rank, and returns the
// same ordered ResponseList on every rank. Knows nothing of MPI: it talks through a
// ControlChannel. One per process set, on its members (ProcessSetTable owns it); used only by the
// background thread, where Cycle::run calls it once per cycle for each set this rank is in and
// hands the list to the Executor.
//
// One cycle (compute_response_list):
//  1. The requests popped from the local queue this cycle are split: a request whose name and
//     parameters match a response-cache entry only sets that entry's bit; the rest are
//     "uncached" and go to the coordinator in step 3.
//  2. One bitwise AND across ranks carries: the cache bits (an entry is ready when every rank set
//     it), and, inverted so that AND acts as OR, the flags "some rank has uncached requests",
//     "some rank wants shutdown" (with one bit per rank, so every rank learns which ranks
//     left), "some rank has joined", one "invalidate" bit per entry
//     (a rank saw a request with that name but different parameters, or its cached request is
//     stalled), and "rank 0 has new tuned parameters" (autotune). Invalidated entries are evicted
//     on every rank and their pending requests re-sent as uncached. While any rank has joined,
//     the cache is bypassed.
//  2b. Only if rank 0 has new parameters (propose): every rank takes them by one broadcast and
//     applies them in this cycle: the fusion threshold (step 4) and the cache switch. A switch
//     either way empties the cache on every rank, and the cached requests still waiting for
//     their bits go to the coordinator as uncached in this cycle (step 3 runs).
//  3. Only if some rank has uncached requests: gather every rank's uncached requests to rank 0,
//     which reads each rank's list as it arrives (ControlChannel::gather_each). The
//     coordinator counts each name's arrivals in its message table (constant work per
//     request: see Note [The coordinator's work is linear in ranks x tensors] in coordinator.h;
//     while some rank has a join in flight the whole batch is gathered first and read twice,
//     joins first), checks each ready
//     name for consistency across ranks (type, dtype, shape, reduce op, root, scale factors,
//     device) and emits a response per name that every (non-joined) rank has submitted, in the
//     order they became ready, or an Error response naming the tensor and the differing ranks
//     and values. It broadcasts that list to every rank.
//  4. Every rank builds the final list: cache hits (in cache-bit order), then the coordinator's
//     responses; puts the new responses in the cache (same order everywhere, so every cache
//     holds the same slots); then fuses allreduces up to the fusion threshold.
//  5. Only if some rank brought a failure (step 2's "failed" flag): every rank's reason is
//     gathered to rank 0, which broadcasts the failing ranks and each distinct reason once, at
//     its lowest rank, in rank order, so that every rank stops with the same text. See Note [A
//     failed process set stops every rank] in cycle.h.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/control_channel.h"
#include "core/coordinator.h"
#include "core/message.h"
#include "core/response_cache.h"
#include "core/settings.h"
#include "core/tunable_parameters.h"

namespace hvd {
class Timeline;
}

namespace hvd::detail {

// Defaults are the declared ones (settings_table.cc); the runtime builds it with
// controller_options(settings).
struct ControllerOptions {
  std::int64_t fusion_threshold_bytes = default_settings().fusion_threshold_bytes;
  std::int64_t cache_capacity = default_settings().cache_capacity;
  StallOptions stall;
  // A process set's controller: its coordinator names these global ranks and this set.
  CoordinatorGroup group{};
  double cycle_time_ms = default_settings().cycle_time_ms;  // only reported in parameters()
};

inline ControllerOptions controller_options(const Settings& settings) {
  return {settings.fusion_threshold_bytes, settings.cache_capacity, StallOptions(settings), {}, settings.cycle_time_ms};
}

// Counters for tests and benchmarks.
struct ControllerStats {
  std::uint64_t cycles = 0;
  std::uint64_t slow_path_cycles = 0;  // cycles that gathered requests to the coordinator
  std::uint64_t cache_hits = 0;
  std::uint64_t cache_invalidations = 0;
  std::uint64_t parameter_changes = 0;  // tuned parameters applied (step 2b, or apply())
};

class Controller {
 public:
  Controller(ControlChannel& channel, ControllerOptions options, Timeline* timeline = nullptr);

  // One negotiation cycle; see the steps above. `shutdown` is this rank's wish to stop. The
  // result's `shutdown` is true when any rank wished it (the caller then stops after executing
  // the responses). `failure`, when not empty, is why this rank must stop (it implies
  // `shutdown`): the result's shutdown_reason then carries the failing ranks' reasons to every
  // rank (step 5). Collective: every rank must call it once per cycle.
  ResponseList compute_response_list(std::vector<Request> new_requests, bool shutdown,
                                     const std::string& failure = {});
  // This rank has requests waiting for a response (or, as coordinator, a table that is not empty).
  bool busy() const;
  // This rank has submitted requests that wait for other ranks (cached ones whose bit some rank
  // has not set, or ones sent to the coordinator without a response yet).
  bool awaiting_others() const { return !pending_cached_.empty() || !sent_.empty(); }

  const ControllerStats& stats() const { return stats_; }
  const ResponseCache& cache() const { return cache_; }
  // Autotune, rank 0 only: these parameters take effect on every rank in the next cycle. A later
  // proposal before that cycle replaces it.
  void propose(const TunableParameters& parameters);
  // The parameters in effect: the fusion threshold and cache switch this controller applies,
  // and the cycle time the Runtime was last told to use.
  const TunableParameters& parameters() const { return parameters_; }
  // The parameters the last cycle applied (the same cycle on every rank), if it applied any.
  const std::optional<TunableParameters>& applied_this_cycle() const { return applied_; }
  // Applies parameters outside a negotiation cycle: for a process set's controller, called at
  // the same point of the same global cycle on every member. Waiting cached requests are sent
  // as uncached in the set's next cycle.
  void apply(const TunableParameters& parameters);

 private:
  using Clock = std::chrono::steady_clock;
  struct PendingCached {
    Request request;
    Clock::time_point since;
  };
  struct Agreement {  // what the cycle's one bitwise AND established
    bool uncached = false, shutdown = false, joined = false, coordinator_due = false, new_parameters = false,
         failed = false;
    std::vector<int> shutdown_ranks;  // the ranks that asked to shut down this cycle
    std::vector<bool> invalid;  // per cache slot
    std::vector<bool> ready;    // per cache slot
  };

  void classify(std::vector<Request> requests, std::vector<Request>* uncached,
                std::vector<int>* invalid_slots);
  Agreement agree(bool any_uncached, bool shutdown, bool failed, const std::vector<int>& invalid_slots);
  std::vector<Response> take_cache_hits(const Agreement& agreement, std::vector<Request>* uncached);
  ResponseList run_slow_path(std::vector<Request> uncached, bool joined_anywhere);
  void revalidate_pending();
  TunableParameters receive_parameters();  // step 2b's broadcast
  std::string share_failure(const std::string& failure);  // step 5

  ControlChannel& channel_;
  ControllerOptions options_;
  Timeline* timeline_;
  ResponseCache cache_;
  Coordinator coordinator_;  // used on rank 0 only
  ControllerStats stats_;
  TunableParameters parameters_;
  std::optional<TunableParameters> proposed_;  // rank 0: not yet sent
  std::optional<TunableParameters> applied_;   // by the last cycle

  // Rank-local state.
  std::vector<PendingCached> pending_cached_;  // waiting for every rank to set the cache bit
  std::vector<Request> deferred_uncached_;     // lost their cache slot; sent next cycle
  std::map<std::string, Request> sent_;        // uncached requests awaiting a response
  bool joined_ = false;                        // this rank has a JOIN in flight
};

}  // namespace hvd::detail
