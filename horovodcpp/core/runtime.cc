#include "core/runtime.h"

#include <pthread.h>
#include <unistd.h>
#include <sys/prctl.h>

#include <chrono>
#include <sstream>

#include "core/logging.h"
#include "core/settings_agreement.h"
#include "core/stopped.h"

namespace hvd::detail {
namespace {

std::vector<std::string> environment_names() {
  std::vector<std::string> names;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    names.push_back(entry.substr(0, entry.find('=')));
  }
  return names;
}

std::string format_number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

}  // namespace

Runtime::Runtime(Settings settings, std::vector<std::vector<int>> process_sets, Transport transport)
    : settings_(std::move(settings)),
      initial_process_sets_(std::move(process_sets)),
      transport_(std::move(transport)) {}

Runtime::~Runtime() { stop(); }

void Runtime::start() {
  thread_ = std::thread([this] { background_main(); });
  std::unique_lock<std::mutex> lock(init_mutex_);
  init_cv_.wait(lock, [this] { return init_done_; });
  if (!init_error_.empty()) {
    lock.unlock();
    thread_.join();
    throw Error(init_error_);
  }
}

bool Runtime::stop(std::optional<std::chrono::milliseconds> limit) {
  shutdown_requested_ = true;
  if (!thread_.joinable()) return !abandoned_.load();
  // Waits for the loop's end or the watchdog's verdict, whichever comes first: a loop stuck in
  // MPI with a frozen peer (this rank's shutdown round, say) returns only when that peer does,
  // and the watchdog gives up on it meanwhile (abandon()), which a join would never notice.
  bool finished = false;
  {
    std::unique_lock<std::mutex> lock(init_mutex_);
    const auto settled = [this] { return loop_done_ || abandoned_.load(); };
    if (limit)
      init_cv_.wait_for(lock, *limit, settled);
    else
      init_cv_.wait(lock, settled);
    finished = loop_done_;
  }
  if (abandoned_.load() || !finished) {
    thread_.detach();  // stuck in MPI for good; joining would hang this rank too
    return false;
  }
  thread_.join();
  return true;
}

// No timer: a cycle starts when some rank has work (see CyclePacer).
void Runtime::run_loop() {
  while (true) {
    try {
      pacer_->wait_for_start(*cycle_);
    } catch (const std::exception& e) {
      if (abandoned_.load()) return;
      return shut_down_on_background_thread(StopKind::Failed, std::string("waiting for a cycle failed: ") + e.what());
    }
    const Cycle::Report report = cycle_->run();
    if (abandoned_.load()) return;  // the watchdog failed everything already; touch nothing
    if (report.ran) autotune_->after_cycle(report.global, report.started);
    if (report.stop) return shut_down_on_background_thread(report.stop->kind, report.stop->reason);
  }
}

void Runtime::background_main() {
  // Threads started from here inherit the name: those MPI and PMIx start inside MPI_Init are
  // named "hvd-bg-init", so that only this thread is "hvd-background" once init is done.
  pthread_setname_np(pthread_self(), "hvd-bg-init");
  background_tid_ = static_cast<long>(gettid());
  // The waits of this thread sleep for tens of microseconds at a time (it never spins); Linux's
  // default 50 us timer slack would stretch each of them several-fold.
  prctl(PR_SET_TIMERSLACK, 5000UL, 0UL, 0UL, 0UL);
  try {
    initialize_on_background_thread();
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(init_mutex_);
    init_error_ = std::string("hvd::init() failed: ") + e.what();
    init_done_ = true;
    init_cv_.notify_all();
    return;
  }
  pthread_setname_np(pthread_self(), "hvd-background");
  {
    std::lock_guard<std::mutex> lock(init_mutex_);
    running_ = true;
    init_done_ = true;
  }
  init_cv_.notify_all();
  log_info(describe_setup());
  for (const auto& warning : unknown_setting_warnings(environment_names())) log_warn(warning);
  run_loop();
  std::lock_guard<std::mutex> lock(init_mutex_);
  loop_done_ = true;
  init_cv_.notify_all();
}

void Runtime::initialize_on_background_thread() {
  world_ = transport_.create_world(settings_);
  topology_ = {world_->rank(),       world_->size(),       world_->local_rank(),
               world_->local_size(), world_->cross_rank(), world_->cross_size()};
  configure_logging(topology_.rank, settings_.log_level, settings_.log_hide_time);
  std::string local_error;
  try {
    set_up_on_world();
  } catch (const std::exception& e) {
    local_error = e.what();
  }
  // A failure on some ranks only would leave the others waiting in their first collective:
  // every rank learns whether any failed, and why, and all of them fail together.
  std::string error = agree_on_init(local_error);
  // Only then (every rank got this far) compare the settings that every rank must share.
  if (error.empty()) error = check_settings_agree(world_->control(), agreed_values(settings_, backend_names()));
  if (error.empty()) error = create_initial_process_sets();
  if (!error.empty()) {
    release_world();
    throw Error(error);
  }
  watchdog_ = std::make_unique<Watchdog>(WatchdogOptions(settings_), topology_.rank, topology_.size, world_->liveness(),
                                         progress_, [this](const std::string& reason) { abandon(reason); },
                                         [this](const std::string& notice) {
                                           for (auto& backend : backends_) backend->peer_aborted(notice);
                                         });
  watchdog_->start();
}

void Runtime::set_up_on_world() {
  op_context_.reset(new OpContext{settings_, *world_, timeline_, fusion_buffer_,
                                  [this](std::vector<TensorTableEntry>& entries, const Status& status) {
                                    executor_->finish(entries, status);
                                  },
                                  [this](const std::string& notice) { world_->liveness().send_abort_notice(notice); }});
  backends_ = transport_.create_backends(*world_);
  for (auto& backend : backends_) backend->register_ops(registry_, *op_context_);
  if (!settings_.cpu_operations.empty() && !registry_.has_backend(settings_.cpu_operations))
    throw Error("HOROVOD_CPU_OPERATIONS=" + settings_.cpu_operations + " asks for a backend this build does not contain");
  if (!settings_.gpu_operations.empty() && !registry_.has_backend(settings_.gpu_operations))
    throw Error("HOROVOD_GPU_OPERATIONS=" + settings_.gpu_operations + " asks for a backend this build does not contain");
  queue_.set_ranks(topology_.size);
  autotune_ = std::make_unique<Autotune>(settings_, topology_.rank, queue_, process_sets_);
  {
    std::lock_guard<std::mutex> lock(process_sets_.mutex());
    ProcessSetState& global = process_sets_.add(world_->global().global_ranks());
    global.communicator = &world_->global();
    global.controller = make_controller(global);
  }
  executor_ = std::make_unique<Executor>(
      settings_, topology_.rank, queue_, registry_, timeline_, process_sets_, *world_, backends_,
      [this](const ProcessSetState& set) { return make_controller(set); }, abandoned_);
  cycle_ = std::make_unique<Cycle>(topology_.rank, queue_, process_sets_, *executor_, timeline_, progress_,
                                   BackgroundPlacement(BackgroundPlacement::cores_full(topology_.local_size)),
                                   shutdown_requested_, abandoned_);
  CyclePacer::Options pacing;
  pacing.oversubscribed = ranks_outnumber_cores(topology_.local_size);
  pacer_ = std::make_unique<CyclePacer>(world_->control(), &progress_, pacing);
  // HOROVOD_TIMELINE=DYNAMIC (Horovod's value): no file until hvd::start_timeline().
  if (!settings_.timeline_path.empty() && settings_.timeline_path != kDynamicTimeline)
    start_timeline(settings_.timeline_path, settings_.timeline_mark_cycles);
}

std::string Runtime::agree_on_init(const std::string& local_error) {
  ControlChannel& channel = world_->control();
  const std::vector<int> ranks = channel.flagged_ranks(!local_error.empty());
  if (ranks.empty()) return {};
  // The lowest failing rank's reason reaches every rank.
  const int first = ranks.front();
  auto gathered = channel.gather(std::vector<std::uint8_t>(local_error.begin(), local_error.end()));
  std::vector<std::uint8_t> reason;
  if (channel.rank() == 0) reason.assign(gathered[first].begin(), gathered[first].end());
  reason = channel.broadcast(reason);
  std::string ranks_text;
  for (std::size_t i = 0; i < ranks.size(); ++i) ranks_text += (i ? ", " : "") + std::to_string(ranks[i]);
  return "rank" + std::string(ranks.size() > 1 ? "s " : " ") + ranks_text + " could not set up (rank " +
         std::to_string(first) + ": " + std::string(reason.begin(), reason.end()) + ")";
}

void Runtime::start_timeline(const std::string& path, bool mark_cycles) {
  if (settings_.timeline_all_ranks)
    timeline_.start(path + ".rank" + std::to_string(topology_.rank), topology_.rank, mark_cycles);
  else if (topology_.rank == 0)
    timeline_.start(path, topology_.rank, mark_cycles);
}

void Runtime::abandon(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(stop_mutex_);
    stop_reason_ = reason;
  }
  failed_ = true;
  abandoned_ = true;
  {
    std::lock_guard<std::mutex> lock(init_mutex_);  // so that a stop() about to wait sees it
  }
  init_cv_.notify_all();  // a stop() waiting for the loop gives up on it now
  running_ = false;
  log_error(reason);
  const Status failure = Status::aborted(reason);
  for (auto& e : queue_.close(stopped_message(reason)))
    if (e.handle) e.handle->fail_all(failure);
  live_handles_.fail_all(failure);
}

void Runtime::shut_down_on_background_thread(StopKind kind, const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(stop_mutex_);
    stop_reason_ = reason;
  }
  failed_ = kind == StopKind::Failed || kind == StopKind::FailedAlone;
  running_ = false;
  executor_->abort_pending(reason);
  // See Note [An exception in the executor stops every rank] (executor.h). The others may stay
  // inside a collective for good and never finalize: MPI_Finalize, a fence over every process in
  // Open MPI, would hold this rank (and its hvd::shutdown()) until mpirun kills it, so the world
  // is given up instead. Otherwise a peer that shut down waits in MPI_Finalize until this rank
  // finalizes too: do it now rather than at this rank's own hvd::shutdown().
  if (kind == StopKind::FailedAlone && watchdog_)
    watchdog_->stop(reason);
  release_world(kind == StopKind::FailedAlone ? WorldEnd::Abandon : WorldEnd::Finalize);
  if (failed_) log_warn("runtime stopped: " + reason);
  if (kind == StopKind::PeerLeft) log_info("runtime stopped: " + reason);
}

std::string Runtime::stop_reason() const {
  std::lock_guard<std::mutex> lock(stop_mutex_);
  return stop_reason_;
}

void Runtime::release_world(WorldEnd end) {
  if (watchdog_) watchdog_->stop();
  for (auto& backend : backends_) backend->shutdown(end);
  process_sets_.clear();
  timeline_.stop();
  if (end == WorldEnd::Abandon)
    world_->abandon();
  else
    world_->finalize();
}

std::shared_ptr<HandleState> Runtime::enqueue(std::vector<TensorTableEntry> entries, std::vector<Request> requests,
                                              int process_set_id) {
  auto state = std::make_shared<HandleState>(static_cast<int>(entries.size()));
  for (std::size_t i = 0; i < entries.size(); ++i) {
    entries[i].handle = state;
    entries[i].handle_index = static_cast<int>(i);
    entries[i].process_set_id = process_set_id;
    state->outputs[i] = entries[i].output;
  }
  const auto now = std::chrono::steady_clock::now();
  for (auto& r : requests) {
    r.process_set_id = process_set_id;
    r.submitted = now;
  }
  // Held across the add, so a set cannot be removed between the check and the add.
  std::lock_guard<std::mutex> lock(process_sets_.mutex());
  if (process_set_id != 0) {
    check_member(process_set_id, [&] {
      return requests.empty() ? std::string("operation")
                              : std::string(request_type_name(requests.front().type)) + " of '" +
                                    display_name(entries.front().name) + "'";
    });
  }
  // A stop sets its reason, turns running_ false, then closes the queue: a submission in between,
  // by a caller that already saw running() false, is refused as the closed queue would refuse it.
  if (!running()) {
    const std::string reason = stop_reason();
    if (!reason.empty()) throw Error(stopped_message(reason));
  }
  live_handles_.track(state);
  // The negotiation opens at the submission: the request may wait for a cycle another rank
  // starts, and a rank frozen meanwhile leaves it open in the trace, where it was stuck.
  auto open_negotiations = [this](const std::vector<Request>& accepted) {
    for (const auto& r : accepted) {
      timeline_.negotiate_start(r.name, request_type_name(r.type));
      timeline_.negotiate_rank_ready(r.name, topology_.rank);
    }
  };
  if (auto error = queue_.add(std::move(entries), std::move(requests), open_negotiations)) {
    // The queue refuses a name already in flight (the caller's to fix) or, once closed, everything.
    if (!running()) throw Error(*error);
    throw InvalidArgument(*error);
  }
  return state;
}

ControllerStats Runtime::controller_stats() const { return cycle_ ? cycle_->stats() : ControllerStats{}; }

TunableParameters Runtime::tuned_parameters() const { return autotune_->tuned(); }

bool Runtime::autotune_decided() const { return autotune_->decided(); }

void Runtime::request_parameters(const TunableParameters& p) { autotune_->request(p); }

std::string Runtime::backend_names() const {
  std::string backends;
  for (const auto& backend : backends_) backends += (backends.empty() ? "" : ", ") + std::string(backend->name());
  return backends;
}

std::string Runtime::describe_setup() const {
  const std::string backends = backend_names();
  return "initialized: rank " + std::to_string(topology_.rank) + " of " + std::to_string(topology_.size) +
         " (local " + std::to_string(topology_.local_rank) + " of " + std::to_string(topology_.local_size) +
         ", cross " + std::to_string(topology_.cross_rank) + " of " + std::to_string(topology_.cross_size) +
         "); backends: " + backends + "; fusion threshold " + std::to_string(settings_.fusion_threshold_bytes) +
         " bytes, cycle " + format_number(settings_.cycle_time_ms) + " ms, cache capacity " +
         std::to_string(settings_.cache_capacity);
}

}  // namespace hvd::detail
