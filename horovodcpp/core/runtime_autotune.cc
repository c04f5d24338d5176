// The Runtime's side of autotune (HOROVOD_AUTOTUNE=1): rank 0's ParameterManager measures each
// global cycle and decides; the global Controller carries a decision to every rank and applies
// it in one cycle (controller.h, step 2b); here the cycle time (the settle window's longest hold)
// and the other process sets follow.
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

bool Runtime::autotune_decided() const {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  return autotune_decided_;
}

}  // namespace hvd::detail
