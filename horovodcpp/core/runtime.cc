#include "core/runtime.h"

#include <pthread.h>
#include <unistd.h>
#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <sstream>

#include "core/blocked_callers.h"
#include "core/collective_traits.h"
#include "core/logging.h"
#include "core/settings_agreement.h"

namespace hvd::detail {
namespace {

// This rank's tensor, on the op's end event (the op opens before the entry is taken).
TimelineArgs tensor_args(const TensorTableEntry& e) {
  TimelineArgs args;
  if (e.input) {
    args.emplace_back("dtype", dtype_name(e.input->dtype()));
    args.emplace_back("shape", shape_string(e.input->shape()));
    args.emplace_back("bytes", std::to_string(e.input->size_bytes()));
  }
  return args;
}

// Once the cycle's response list is known, every tensor's op opens with QUEUE inside: the wait
// behind earlier responses of the cycle, closed when its own response starts executing.
void open_queued_ops(Timeline& timeline, const ResponseList& list) {
  if (!timeline.enabled()) return;
  for (const auto& response : list.responses) {
    if (response.type == ResponseType::Error || response.type == ResponseType::Join) continue;
    TimelineArgs args;
    if (response.names.size() > 1)
      args.emplace_back("fused_with", std::to_string(response.names.size()) + " tensors, " +
                                          std::to_string(response.total_bytes()) + " bytes, first '" +
                                          response.names.front() + "'");
    for (const auto& name : response.names) {
      timeline.start_op(name, response_type_name(response.type), args);
      timeline.queue_start(name);
    }
  }
}

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

std::string joined_names(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < 8; ++i) out += (i ? ", '" : "'") + display_name(names[i]) + "'";
  if (names.size() > 8) out += ", ... (" + std::to_string(names.size()) + " tensors)";
  return out;
}

}  // namespace

Runtime::Runtime(Settings settings, std::vector<std::vector<int>> process_sets)
    : settings_(std::move(settings)), initial_process_sets_(std::move(process_sets)) {}

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
  bool finished = true;
  if (limit && !abandoned_.load()) {
    std::unique_lock<std::mutex> lock(init_mutex_);
    finished = init_cv_.wait_for(lock, *limit, [this] { return loop_done_ || abandoned_.load(); }) && loop_done_;
  }
  if (abandoned_.load() || !finished) {
    thread_.detach();  // stuck in MPI for good; joining would hang this rank too
    return false;
  }
  thread_.join();
  return true;
}

void Runtime::background_main() {
  pthread_setname_np(pthread_self(), "hvd-background");  // inherited by threads MPI starts from here
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
  world_ = create_world(settings_);
  topology_ = {world_->rank(),       world_->size(),       world_->local_rank(),
               world_->local_size(), world_->cross_rank(), world_->cross_size()};
  configure_logging(topology_.rank, settings_.log_level);
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
                                         progress_, [this](const std::string& reason) { abandon(reason); });
  watchdog_->start();
}

void Runtime::abandon(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(stop_mutex_);
    stop_reason_ = reason;
  }
  failed_ = true;
  abandoned_ = true;
  running_ = false;
  log_error(reason);
  const Status failure = Status::aborted(reason);
  for (auto& e : queue_.close("horovodcpp has stopped: " + reason))
    if (e.handle) e.handle->fail_all(failure);
  std::lock_guard<std::mutex> lock(handles_mutex_);
  for (auto& weak : live_handles_)
    if (auto state = weak.lock()) state->fail_all(failure);
  live_handles_.clear();
}

void Runtime::track(const std::shared_ptr<HandleState>& state) {
  std::lock_guard<std::mutex> lock(handles_mutex_);
  if (live_handles_.size() >= prune_handles_at_) {
    live_handles_.erase(std::remove_if(live_handles_.begin(), live_handles_.end(),
                                       [](const std::weak_ptr<HandleState>& w) {
                                         auto s = w.lock();
                                         return !s || s->done();
                                       }),
                        live_handles_.end());
    prune_handles_at_ = std::max<std::size_t>(64, 2 * live_handles_.size());
  }
  live_handles_.push_back(state);
}

void Runtime::set_up_on_world() {
  placement_ = BackgroundPlacement(BackgroundPlacement::cores_full(topology_.local_size));
  op_context_.reset(new OpContext{settings_, *world_, timeline_, fusion_buffer_,
                                  [this](std::vector<TensorTableEntry>& entries, const Status& status) {
                                    finish(entries, status);
                                  }});
  backends_ = create_backends(*world_);
  for (auto& backend : backends_) backend->register_ops(registry_, *op_context_);
  if (!settings_.cpu_operations.empty() && !registry_.has_backend(settings_.cpu_operations))
    throw Error("HOROVOD_CPU_OPERATIONS=" + settings_.cpu_operations + " asks for a backend this build does not contain");
  if (!settings_.gpu_operations.empty() && !registry_.has_backend(settings_.gpu_operations))
    throw Error("HOROVOD_GPU_OPERATIONS=" + settings_.gpu_operations + " asks for a backend this build does not contain");
  set_up_autotune();
  {
    std::lock_guard<std::mutex> lock(process_sets_.mutex());
    ProcessSetState& global = process_sets_.add(world_->global().global_ranks());
    global.communicator = &world_->global();
    global.controller = make_controller(global);
    controller_ = global.controller.get();
  }
  if (!settings_.timeline_path.empty()) start_timeline(settings_.timeline_path, settings_.timeline_mark_cycles);
}

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

std::string Runtime::describe_cycle(const ResponseList& list) const {
  const ControllerStats& stats = controller_->stats();
  std::string out = "cycle " + std::to_string(stats.cycles) + ": " + std::to_string(list.responses.size()) +
                    " response(s):";
  for (const auto& r : list.responses)
    out += std::string(" ") + response_type_name(r.type) + "[" + std::to_string(r.names.size()) + " tensor(s), " +
           std::to_string(r.total_bytes()) + " B]";
  return out + "; so far " + std::to_string(stats.cache_hits) + " cache hit(s), " +
         std::to_string(stats.slow_path_cycles) + " slow-path cycle(s)";
}

void Runtime::publish_stats() {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  stats_ = controller_->stats();
}

ControllerStats Runtime::controller_stats() const {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  return stats_;
}

std::string Runtime::agree_on_init(const std::string& local_error) {
  ControlChannel& channel = world_->control();
  std::vector<std::uint64_t> failed((channel.size() + 63) / 64, 0);
  if (!local_error.empty()) failed[channel.rank() / 64] |= std::uint64_t{1} << (channel.rank() % 64);
  channel.bitwise_or(failed);
  std::vector<int> ranks;
  for (int r = 0; r < channel.size(); ++r)
    if ((failed[r / 64] >> (r % 64)) & 1) ranks.push_back(r);
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

void Runtime::run_loop() {
  queue_.set_ranks(topology_.size);
  while (true) {
    // No timer: a cycle starts when some rank has work (see ControlChannel::wait_for_cycle_start).
    try {
      world_->control().wait_for_cycle_start([this](std::chrono::microseconds timeout) { return wants_cycle(timeout); },
                                             [this] { return cycle_expectation(); });
    } catch (const std::exception& e) {
      if (abandoned_.load()) return;
      shut_down_on_background_thread(StopKind::Failed, std::string("waiting for a cycle failed: ") + e.what());
      return;
    }
    const auto cycle_start = std::chrono::steady_clock::now();
    placement_.follow_blocked_caller();
    last_cycle_start_ = cycle_start;
    if (abandoned_.load()) return;  // the watchdog failed everything already; touch nothing
    progress_.enter_cycle(controller_->stats().cycles + 1);
    timeline_.mark_cycle_start();
    // Each set's requests go to its own controller; the global set negotiates first.
    std::map<int, std::vector<Request>> requests;
    std::vector<Request> popped = queue_.pop_requests();
    const bool brought_requests = !popped.empty();
    for (auto& r : popped) requests[r.process_set_id].push_back(std::move(r));
    ProcessSetState& global = *process_sets_.member_sets().front();
    for (const auto& r : requests[0])
      if (r.type == RequestType::Join) global.joined = true;
    ResponseList list;
    try {
      // A set's failure (a stall there) stops every rank: its wish to shut down goes through
      // the global set, which names this rank to the others.
      list = controller_->compute_response_list(std::move(requests[0]),
                                                shutdown_requested_.load() || !set_failure_.empty());
    } catch (const std::exception& e) {
      if (abandoned_.load()) return;  // the watchdog gave up on this thread: touch nothing more
      shut_down_on_background_thread(StopKind::Failed, std::string("negotiation failed: ") + e.what());
      return;
    }
    if (abandoned_.load()) return;
    publish_stats();
    if (!list.responses.empty() && log_enabled(LogLevel::Debug)) log_debug(describe_cycle(list));
    open_queued_ops(timeline_, list);
    for (const auto& response : list.responses) {
      if (abandoned_.load()) return;
      execute(response, global);
    }
    autotune_after_cycle(list, cycle_start);
    // Then every other set this rank belongs to, by ascending id: the same order on every
    // member, so the sets' blocking rounds cannot wait on each other in a cycle.
    if (!list.shutdown) {
      for (ProcessSetState* set : process_sets_.member_sets()) {
        if (set->id == 0) continue;
        if (!run_set_round(*set, std::move(requests[set->id]))) return;
      }
    }
    progress_.leave_cycle();
    if (brought_requests) queue_.record_cycle_start(awaiting_others_in_any_set());
    if (abandoned_.load()) return;
    if (list.shutdown) {
      if (!set_failure_.empty())
        shut_down_on_background_thread(StopKind::Failed, set_failure_);
      else if (!list.shutdown_reason.empty())
        shut_down_on_background_thread(StopKind::Failed, list.shutdown_reason);
      else if (shutdown_requested_.load())
        shut_down_on_background_thread(StopKind::Requested, "hvd::shutdown() was called");
      else
        shut_down_on_background_thread(StopKind::PeerLeft, describe_shutdown(list));
      return;
    }
  }
}

// Whether this rank wants the next cycle, waiting up to `timeout` for a reason: submissions that
// are due (SettleWindow), a wish to stop, or, while anything is in flight, a heartbeat, so the
// stall inspector and the check for stalled cached tensors keep running when nothing new comes.
bool Runtime::wants_cycle(std::chrono::microseconds timeout) {
  using Clock = std::chrono::steady_clock;
  bool want = shutdown_requested_.load() || !set_failure_.empty();
  if (!want) {
    const bool busy = busy_in_any_set();
    const auto heartbeat = last_cycle_start_ + kBusyHeartbeat;
    auto deadline = Clock::now() + timeout;
    if (busy) deadline = std::min(deadline, heartbeat);
    want = queue_.wait_until_due(deadline) || (busy && Clock::now() >= heartbeat);
  }
  // From here on the ranks must start together: waiting for that is watched.
  if (want) progress_.enter_cycle(controller_->stats().cycles + 1);
  return want;
}

bool Runtime::run_set_round(ProcessSetState& set, std::vector<Request> requests) {
  for (const auto& r : requests)
    if (r.type == RequestType::Join) set.joined = true;
  ResponseList list;
  try {
    list = set.controller->compute_response_list(std::move(requests), false);
  } catch (const std::exception& e) {
    if (abandoned_.load()) return false;
    shut_down_on_background_thread(StopKind::Failed, "negotiation in " + describe_process_set(set.id, set.ranks) +
                                                         " failed: " + e.what());
    return false;
  }
  open_queued_ops(timeline_, list);
  for (const auto& response : list.responses) {
    if (abandoned_.load()) return false;
    execute(response, set);
  }
  if (!list.shutdown_reason.empty() && set_failure_.empty()) set_failure_ = list.shutdown_reason;
  return true;
}

// This rank has requests waiting for a response in some set (or, as a coordinator, other
// ranks' requests).
bool Runtime::busy_in_any_set() {
  for (const ProcessSetState* set : process_sets_.member_sets())
    if (set->controller->busy()) return true;
  return false;
}

bool Runtime::awaiting_others_in_any_set() {
  for (const ProcessSetState* set : process_sets_.member_sets())
    if (set->controller->awaiting_others()) return true;
  return false;
}

// A rank in every set submits to every collective it takes part in, and its own submission
// starts (or joins) the cycle that completes it; only a rank left out of some set is needed in
// cycles it brings nothing to. A joined rank has its join request out, so it awaits the others.
// Submissions held by the settle window (a leading rank, a burst settling) join the cycle of
// whichever rank starts first: worth looking for often while a user thread waits for them.
CycleExpectation Runtime::cycle_expectation() {
  if (awaiting_others_in_any_set()) return CycleExpectation::PeersDue;
  if (queue_.has_waiting_requests())
    return BlockedCallers::any() ? CycleExpectation::PeersDue : CycleExpectation::MayBeNeeded;
  if (process_sets_.some_set_excludes_this_rank()) return CycleExpectation::MayBeNeeded;
  return CycleExpectation::OwnWorkFirst;
}

std::vector<TensorTableEntry> Runtime::entries_for(const Response& response, ProcessSetState& set) {
  std::vector<TensorTableEntry> entries;
  for (std::size_t i = 0; i < response.names.size(); ++i) {
    auto taken = queue_.take({response.names[i]}, set.id);
    if (!taken.empty()) {
      entries.push_back(std::move(taken.front()));
      continue;
    }
    const CollectiveTraits* traits = find_traits(response.type);
    if (traits == nullptr || !traits->has_tensor) continue;
    if (!(set.joined && traits->joinable))
      log_error("internal: no local entry for tensor '" + response.names[i] + "' in a " +
                response_type_name(response.type) + " response; contributing zeros");
    // A joined rank contributes zeros to the joinable collectives it no longer submits.
    TensorTableEntry standin;
    standin.name = response.names[i];
    standin.type = traits->request;
    standin.input = HostTensor::allocate(response.dtype, response.shapes.at(i));
    standin.output = standin.input;
    standin.reduce_op = response.reduce_op;
    standin.prescale_factor = response.prescale_factor;
    standin.postscale_factor = response.postscale_factor;
    entries.push_back(std::move(standin));
  }
  return entries;
}

void Runtime::execute(const Response& response, ProcessSetState& set) {
  std::vector<TensorTableEntry> entries = entries_for(response, set);
  if (response.type == ResponseType::Error) {
    for (auto& e : entries) timeline_.start_op(e.name, "ERROR", {{"error", response.error}});
    finish(entries, Status::error(response.error));
    return;
  }
  if (set.id == 0 && is_process_set_change(response)) {
    change_process_sets(response, entries);
    return;
  }
  if (response.type == ResponseType::Join) {
    set.joined = false;
    for (auto& e : entries)
      if (e.handle) e.handle->join_result = response.last_joined_rank;
    finish(entries, Status::ok());
    return;
  }
  std::string why;
  const Communicator& group = *set.communicator;
  CollectiveOp* op =
      registry_.select(response, entries, group, settings_.cpu_operations, settings_.gpu_operations, &why);
  if (op == nullptr) {
    finish(entries, Status::error(std::string(response_type_name(response.type)) + " of " +
                                  joined_names(response.names) + " failed: " + why));
    return;
  }
  for (auto& e : entries) timeline_.queue_end(e.name);
  Status status = Status::ok();
  try {
    status = op->execute(entries, response, group);
  } catch (const std::exception& e) {
    status = Status::error(e.what());
  }
  if (status.in_progress_now()) return;
  if (!status.is_ok())
    status = Status::error(std::string(response_type_name(response.type)) + " of " +
                           joined_names(response.names) + " failed on rank " + std::to_string(topology_.rank) +
                           ": " + status.message());
  finish(entries, status);
}

void Runtime::finish(std::vector<TensorTableEntry>& entries, const Status& status) {
  std::vector<HandleState*> completed;
  for (auto& e : entries) {
    if (timeline_.enabled()) {
      TimelineArgs args = tensor_args(e);
      if (!status.is_ok()) args.emplace_back("error", status.message());
      timeline_.end_op(e.name, args);
    }
    if (!e.handle) continue;
    if (!e.received_splits.empty()) e.handle->received_splits = e.received_splits;  // alltoall
    if (e.handle->record_entry(e.handle_index, status, e.output)) completed.push_back(e.handle.get());
  }
  for (HandleState* handle : completed) handle->wake();  // after all: see HandleState::record_entry
}

// Backends first (they may still use the world), then the timeline, then MPI itself.
void Runtime::release_world() {
  if (watchdog_) watchdog_->stop();
  for (auto& backend : backends_) backend->shutdown();
  process_sets_.clear();
  timeline_.stop();
  world_->finalize();
}

// A peer's shutdown ends the collectives of every rank, but this rank's program may go on
// (save a checkpoint on rank 0, print results): the message says who left and what still works.
std::string Runtime::describe_shutdown(const ResponseList& list) const {
  std::string ranks;
  for (int r : list.shutdown_ranks)
    if (r != topology_.rank) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  const bool several = ranks.find(',') != std::string::npos;
  return "rank" + std::string(several ? "s " : " ") + ranks + (several ? " have" : " has") +
         " shut down (hvd::shutdown() or the end of its process) while this rank was still running; "
         "collectives are no longer possible, but hvd::rank(), hvd::size() and the other local queries answer "
         "until this rank calls hvd::shutdown()";
}

void Runtime::shut_down_on_background_thread(StopKind kind, const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(stop_mutex_);
    stop_reason_ = reason;
  }
  failed_ = kind == StopKind::Failed;
  running_ = false;
  std::vector<TensorTableEntry> left = queue_.close("horovodcpp has stopped: " + reason);
  for (auto& e : left) {
    std::vector<TensorTableEntry> one;
    one.push_back(std::move(e));
    finish(one, Status::aborted("horovodcpp shut down before " + std::string(request_type_name(one[0].type)) +
                                " of tensor '" + display_name(one[0].name) + "' completed: " + reason));
  }
  // A peer that shut down waits in MPI_Finalize (a fence over every process in Open MPI) until
  // this rank finalizes too: do it now rather than at this rank's own hvd::shutdown().
  release_world();
  if (kind == StopKind::Failed) log_warn("runtime stopped: " + reason);
  if (kind == StopKind::PeerLeft) log_info("runtime stopped: " + reason);
}

std::string Runtime::stop_reason() const {
  std::lock_guard<std::mutex> lock(stop_mutex_);
  return stop_reason_;
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
    const std::string op = requests.empty() ? std::string("operation")
                                            : std::string(request_type_name(requests.front().type)) + " of '" +
                                                  display_name(entries.front().name) + "'";
    check_member(process_set_id, op);
  }
  track(state);
  // The negotiation opens at the submission: the request may wait for a cycle another rank
  // starts, and a rank frozen meanwhile leaves it open in the trace, where it was stuck.
  auto open_negotiations = [this](const std::vector<Request>& accepted) {
    for (const auto& r : accepted) {
      timeline_.negotiate_start(r.name, request_type_name(r.type));
      timeline_.negotiate_rank_ready(r.name, topology_.rank);
    }
  };
  if (auto error = queue_.add(std::move(entries), std::move(requests), open_negotiations)) throw Error(*error);
  return state;
}

std::string Runtime::generate_name(const std::string& prefix) {
  std::lock_guard<std::mutex> lock(names_mutex_);
  return prefix + ".noname." + std::to_string(name_counters_[prefix]++);
}

}  // namespace hvd::detail
