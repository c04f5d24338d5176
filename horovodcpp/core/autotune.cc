#include "core/autotune.h"

#include "core/logging.h"

namespace hvd::detail {

Autotune::Autotune(const Settings& settings, int rank, TensorQueue& queue, ProcessSetTable& sets)
    : rank_(rank),
      queue_(queue),
      sets_(sets),
      tuned_{settings.fusion_threshold_bytes, settings.cycle_time_ms, settings.cache_capacity > 0} {
  queue_.set_cycle_time_ms(settings.cycle_time_ms);
  if (!settings.autotune || rank != 0) return;
  tuner_ = std::make_unique<ParameterManager>(autotune_options(settings), tuned_);
  decided_ = tuner_->done();
  log_info("autotune: starting from " + describe(tuned_));
}

void Autotune::after_cycle(const ResponseList& global, std::chrono::steady_clock::time_point cycle_start) {
  Controller& controller = *sets_.next_member_set(-1)->controller;
  if (const auto& applied = controller.applied_this_cycle()) {
    queue_.set_cycle_time_ms(applied->cycle_time_ms);
    // Every rank is at this point of the same cycle: the sets switch together too.
    for (ProcessSetState* set : sets_.member_sets())
      if (set->id != 0) set->controller->apply(*applied);
    std::lock_guard<std::mutex> lock(mutex_);
    tuned_ = *applied;
    log_debug("autotune: now " + describe(*applied));
  }
  if (has_request_.load(std::memory_order_acquire)) {
    std::optional<TunableParameters> requested;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      requested.swap(requested_);
      has_request_.store(false, std::memory_order_release);
    }
    if (requested) controller.propose(*requested);
  }
  if (!tuner_ || tuner_->done()) return;
  keys_.clear();  // reused: this runs after every cycle on the thread that drives MPI
  std::int64_t bytes = 0;
  for (const auto& response : global.responses) {
    if (response.type == ResponseType::Error || response.type == ResponseType::Join ||
        response.type == ResponseType::Barrier)
      continue;
    for (const auto& name : response.names) keys_.push_back(ParameterManager::name_key(name));
    bytes += response.total_bytes();
  }
  if (auto next = tuner_->record(keys_, bytes, cycle_start)) {
    controller.propose(*next);
    std::lock_guard<std::mutex> lock(mutex_);
    decided_ = tuner_->done();
  }
}

TunableParameters Autotune::tuned() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return tuned_;
}

void Autotune::request(const TunableParameters& p) {
  if (!in_range(p))
    throw Error("hvd::detail::request_parameters: out of range (" + describe(p) +
                "): the threshold must be >= 0 and the cycle time in (0, 60000] ms");
  std::lock_guard<std::mutex> lock(mutex_);
  if (!decided_)
    throw Error("hvd::detail::request_parameters(" + describe(p) +
                "): HOROVOD_AUTOTUNE=1 is still deciding on this rank; ask once hvd::detail::autotune_decided()");
  if (rank_ != 0) return;  // rank 0 proposes for everyone
  requested_ = p;
  has_request_.store(true, std::memory_order_release);
}

bool Autotune::decided() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return decided_;
}

}  // namespace hvd::detail
