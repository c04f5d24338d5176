// The Runtime's side of autotune (HOROVOD_AUTOTUNE=1): rank 0's ParameterManager measures each
// global cycle and decides; the global Controller carries a decision to every rank and applies
// it in one cycle (controller.h, step 2b); here the cycle time (the settle window's longest hold)
// and the other process sets follow. A benchmark may also ask for parameters of its own
// (request_parameters), which travel the same way once the tuner is done.
#include <mutex>

#include "core/logging.h"
#include "core/runtime.h"

namespace hvd::detail {

void Runtime::set_up_autotune() {
  queue_.set_cycle_time_ms(settings_.cycle_time_ms);
  const TunableParameters initial{settings_.fusion_threshold_bytes, settings_.cycle_time_ms, settings_.cache_capacity > 0};
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    tuned_ = initial;
  }
  if (!settings_.autotune || topology_.rank != 0) return;
  tuner_ = std::make_unique<ParameterManager>(autotune_options(settings_), initial);
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    autotune_decided_ = tuner_->done();
  }
  log_info("autotune: starting from " + describe(initial));
}

void Runtime::autotune_after_cycle(const ResponseList& list, std::chrono::steady_clock::time_point cycle_start) {
  if (const auto& applied = controller_->applied_this_cycle()) {
    queue_.set_cycle_time_ms(applied->cycle_time_ms);
    // Every rank is at this point of the same global cycle: the sets switch together too.
    for (ProcessSetState* set : process_sets_.member_sets())
      if (set->id != 0) set->controller->apply(*applied);
    std::lock_guard<std::mutex> lock(stats_mutex_);
    tuned_ = *applied;
    log_debug("autotune: now " + describe(*applied));
  }
  if (has_request_.load(std::memory_order_acquire)) {
    std::optional<TunableParameters> requested;
    {
      std::lock_guard<std::mutex> lock(stats_mutex_);
      requested.swap(requested_);
      has_request_.store(false, std::memory_order_release);
    }
    if (requested) controller_->propose(*requested);
  }
  if (!tuner_ || tuner_->done()) return;
  autotune_keys_.clear();  // reused: this runs after every cycle on the thread that drives MPI
  std::int64_t bytes = 0;
  for (const auto& response : list.responses) {
    if (response.type == ResponseType::Error || response.type == ResponseType::Join ||
        response.type == ResponseType::Barrier)
      continue;
    for (const auto& name : response.names) autotune_keys_.push_back(ParameterManager::name_key(name));
    bytes += response.total_bytes();
  }
  if (auto next = tuner_->record(autotune_keys_, bytes, cycle_start)) {
    controller_->propose(*next);
    std::lock_guard<std::mutex> lock(stats_mutex_);
    autotune_decided_ = tuner_->done();
  }
}

TunableParameters Runtime::tuned_parameters() const {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  return tuned_;
}

void Runtime::request_parameters(const TunableParameters& p) {
  if (!in_range(p))
    throw Error("hvd::detail::request_parameters: out of range (" + describe(p) +
                "): the threshold must be >= 0 and the cycle time in (0, 60000] ms");
  std::lock_guard<std::mutex> lock(stats_mutex_);
  if (!autotune_decided_)
    throw Error("hvd::detail::request_parameters(" + describe(p) +
                "): HOROVOD_AUTOTUNE=1 is still deciding on this rank; ask once hvd::detail::autotune_decided()");
  if (topology_.rank != 0) return;  // rank 0 proposes for everyone
  requested_ = p;
  has_request_.store(true, std::memory_order_release);
}

bool Runtime::autotune_decided() const {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  return autotune_decided_;
}

}  // namespace hvd::detail
