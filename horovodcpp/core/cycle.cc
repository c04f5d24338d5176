#include "core/cycle.h"

#include "core/logging.h"

namespace hvd::detail {

Cycle::Cycle(int rank, TensorQueue& queue, ProcessSetTable& sets, Executor& executor, Timeline& timeline,
             Progress& progress, BackgroundPlacement placement, const std::atomic<bool>& stop_requested,
             const std::atomic<bool>& abandoned)
    : rank_(rank),
      queue_(queue),
      sets_(sets),
      executor_(executor),
      timeline_(timeline),
      progress_(progress),
      placement_(placement),
      stop_requested_(stop_requested),
      abandoned_(abandoned) {}

Cycle::Report Cycle::run() {
  Report report;
  report.started = std::chrono::steady_clock::now();
  placement_.follow_blocked_caller();
  if (abandoned_.load()) return report;  // the watchdog failed everything already; touch nothing
  ProcessSetState* global = sets_.next_member_set(-1);
  progress_.enter_cycle(global->controller->stats().cycles + 1);
  timeline_.mark_cycle_start();
  // Each set's requests go to its own controller.
  std::map<int, std::vector<Request>> requests;
  std::vector<Request> popped = queue_.pop_requests();
  const bool brought_requests = !popped.empty();
  for (auto& r : popped) requests[r.process_set_id].push_back(std::move(r));
  // The next set is looked up after each round: the global round may add or remove sets.
  for (ProcessSetState* set = global; set != nullptr; set = sets_.next_member_set(set->id)) {
    const Round round = run_round(*set, std::move(requests[set->id]), report);
    if (round == Round::Abort) return report;
    if (round == Round::Last) break;
  }
  report.ran = true;
  progress_.leave_cycle();
  if (brought_requests) queue_.record_cycle_start(awaiting_others());
  return report;
}

Cycle::Round Cycle::run_round(ProcessSetState& set, std::vector<Request> requests, Report& report) {
  for (const auto& r : requests)
    if (r.type == RequestType::Join) set.joined = true;
  // Only the global set reaches every rank: it carries this rank's wish to stop, and a set's
  // failure with its reason. See Note [A failed process set stops every rank].
  const bool global = set.id == 0;
  ResponseList list;
  try {
    list = set.controller->compute_response_list(std::move(requests), global && stop_wanted(),
                                                 global ? set_failure_ : std::string());
  } catch (const std::exception& e) {
    if (abandoned_.load()) return Round::Abort;
    if (global) {
      report.stop = Stop{StopKind::Failed, std::string("negotiation failed: ") + e.what()};
      return Round::Abort;
    }
    // This rank's later sets still run their rounds this cycle; the next global round stops all.
    const std::string reason = "negotiation in " + describe_process_set(set.id, set.ranks) + " failed: " + e.what();
    hold_set_failure(set, reason);
    log_error(reason + "; stopping every rank in the next cycle");
    return Round::Next;
  }
  if (abandoned_.load()) return Round::Abort;
  if (global) {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    stats_ = set.controller->stats();  // before any handle of the cycle completes
  }
  if (!list.responses.empty() && log_enabled(LogLevel::Debug)) log_debug(describe_round(set, list));
  std::string failure;
  if (!executor_.run(list, set, &failure)) {
    if (!failure.empty() && !abandoned_.load()) report.stop = Stop{StopKind::FailedAlone, failure};
    return Round::Abort;
  }
  if (global && list.shutdown) {
    // Every rank agreed to stop: the other sets' rounds are skipped on every rank alike. A failure
    // stops every rank with the reason the round agreed on, this rank's own included (two sets
    // may fail in one cycle).
    if (!list.shutdown_reason.empty())
      report.stop = Stop{StopKind::Failed, list.shutdown_reason};
    else if (!set_failure_.empty())
      report.stop = Stop{StopKind::Failed, set_failure_};
    else if (stop_requested_.load())
      report.stop = Stop{StopKind::Requested, "hvd::shutdown() was called"};
    else
      report.stop = Stop{StopKind::PeerLeft, describe_shutdown(list)};
  } else if (!list.shutdown_reason.empty()) {
    // A set's own stop (a stall there) reaches only its members: the next global round stops all.
    hold_set_failure(set, list.shutdown_reason);
  }
  if (global) report.global = std::move(list);
  return report.stop ? Round::Last : Round::Next;
}

// The first failure is the one this rank brings to the global round; the watchdog learns of
// every set that failed here (see Note [A failed process set stops every rank]).
void Cycle::hold_set_failure(const ProcessSetState& set, const std::string& reason) {
  if (set_failure_.empty()) set_failure_ = reason;
  progress_.hold_failure(set.id, set.ranks, reason);
}

ControllerStats Cycle::stats() const {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  return stats_;
}

std::string Cycle::describe_round(const ProcessSetState& set, const ResponseList& list) const {
  const ControllerStats& stats = set.controller->stats();
  std::string out = "cycle " + std::to_string(stats.cycles) +
                    (set.id == 0 ? std::string() : " in " + describe_process_set(set.id, set.ranks)) + ": " +
                    std::to_string(list.responses.size()) + " response(s):";
  for (const auto& r : list.responses)
    out += std::string(" ") + response_type_name(r.type) + "[" + std::to_string(r.names.size()) + " tensor(s), " +
           std::to_string(r.total_bytes()) + " B]";
  return out + "; so far " + std::to_string(stats.cache_hits) + " cache hit(s), " +
         std::to_string(stats.slow_path_cycles) + " slow-path cycle(s)";
}

// A peer's shutdown ends the collectives of every rank, but this rank's program may go on
// (save a checkpoint on rank 0, print results): the message says who left and what still works.
std::string Cycle::describe_shutdown(const ResponseList& list) const {
  std::string ranks;
  for (int r : list.shutdown_ranks)
    if (r != rank_) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  const bool several = ranks.find(',') != std::string::npos;
  return "rank" + std::string(several ? "s " : " ") + ranks + (several ? " have" : " has") +
         " shut down (hvd::shutdown() or the end of its process) while this rank was still running; "
         "collectives are no longer possible, but hvd::rank(), hvd::size() and the other local queries answer "
         "until this rank calls hvd::shutdown()";
}

bool Cycle::wait_until_due(std::chrono::steady_clock::time_point deadline) { return queue_.wait_until_due(deadline); }

bool Cycle::stop_wanted() { return stop_requested_.load() || !set_failure_.empty(); }

// This rank has requests waiting for a response in some set (or, as a coordinator, other
// ranks' requests).
bool Cycle::busy() {
  for (const ProcessSetState* set : sets_.member_sets())
    if (set->controller->busy()) return true;
  return false;
}

bool Cycle::awaiting_others() {
  for (const ProcessSetState* set : sets_.member_sets())
    if (set->controller->awaiting_others()) return true;
  return false;
}

bool Cycle::holds_submissions() { return queue_.has_waiting_requests(); }

bool Cycle::left_out_of_a_set() { return sets_.some_set_excludes_this_rank(); }

}  // namespace hvd::detail
