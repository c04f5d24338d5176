#include "backends/nccl/nccl_context.h"

#include <chrono>
#include <cstring>
#include <thread>

#include "backends/nccl/nccl_errors.h"
#include "core/logging.h"
#include "timeline/timeline.h"

namespace hvd::detail {
namespace {

using Clock = std::chrono::steady_clock;

std::string describe_group(const Communicator& group) {
  return "group " + std::to_string(group.id()) + " (" + std::to_string(group.size()) + " ranks)";
}

std::string seconds(double s) { return std::to_string(static_cast<long long>(s)) + " s"; }

}  // namespace

NcclContext::NcclContext(World& world, OpContext& context) : world_(world), context_(context) {}

NcclContext::~NcclContext() { shutdown(); }

double NcclContext::start_timeout() const { return context_.settings.start_timeout_seconds; }

std::string NcclContext::failure() const {
  if (!failed_.load()) return {};
  std::lock_guard<std::mutex> lock(comms_mutex_);
  return failure_;
}

std::string NcclContext::aborted_error() const {
  const std::string why = failure();
  if (why.empty()) return {};
  return "the NCCL communicators of this process were aborted after an earlier failure (" + why + ")";
}

ncclResult_t NcclContext::settle(ncclComm_t comm) {
  const auto start = Clock::now();
  for (;;) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t rc = ncclCommGetAsyncError(comm, &state);
    if (rc != ncclSuccess) return rc;
    if (state != ncclInProgress) return state;
    if (start_timeout() > 0 && std::chrono::duration<double>(Clock::now() - start).count() > start_timeout())
      return ncclSystemError;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// Note [An aborted rank refuses new communicators at once]: a rank whose communicators were
// aborted joins no new one (its later ops fail at once), and the other ranks of a group being
// created would wait for it inside ncclCommInitRank until HOROVOD_START_TIMEOUT (30 s by
// default): after a failure in a process set, the next op of the world took that long to fail
// on the ranks outside the set. With the unique id every rank says whether it joins, and a
// refusal fails the creation on every rank of the group at once, naming the refusing ranks.
ncclUniqueId NcclContext::share_unique_id(const Communicator& group, bool joining) {
  ncclUniqueId id{};
  if (group.rank() == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(&id);
  std::vector<std::uint8_t> sent;
  try {
    sent = group.control().broadcast(std::vector<std::uint8_t>(bytes, bytes + sizeof(id)));
  } catch (const std::exception& e) {
    throw NcclFailure(std::string("broadcasting the NCCL unique id through the control channel failed: ") + e.what());
  }
  if (sent.size() != sizeof(id))
    throw NcclFailure("the NCCL unique id from the group's rank 0 has " + std::to_string(sent.size()) + " bytes, not " +
                      std::to_string(sizeof(id)));
  std::memcpy(&id, sent.data(), sizeof(id));
  std::vector<int> refused;
  try {
    refused = group.control().flagged_ranks(!joining);
  } catch (const std::exception& e) {
    throw NcclFailure(std::string("agreeing on who joins the NCCL communicator failed: ") + e.what());
  }
  for (int& r : refused) r = group.global_rank(r);
  if (joining && !refused.empty())
    throw NcclGroupFailure("creating the NCCL communicator of " + describe_group(group) + " failed: rank(s) " +
                           ranks_string(refused) + " aborted their NCCL communicators after an earlier failure and " +
                           "join no new one");
  return id;
}

// See Note [Bounded NCCL communicator lifecycle].
ncclComm_t NcclContext::create_comm(const Communicator& group) {
  const ncclUniqueId id = share_unique_id(group, true);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t started = ncclCommInitRankConfig(&comm, group.size(), id, group.rank(), &config);
  if (started != ncclSuccess && started != ncclInProgress) {
    const std::string why = nccl_error_message(started, "ncclCommInitRankConfig", comm);
    if (comm != nullptr) ncclCommAbort(comm);
    throw NcclGroupFailure(why);
  }
  const ncclResult_t state = settle(comm);
  if (state == ncclSuccess) return comm;
  const std::string why =
      state == ncclSystemError && start_timeout() > 0
          ? "creating the NCCL communicator of " + describe_group(group) + " did not complete within HOROVOD_START_TIMEOUT=" +
                seconds(start_timeout()) + ": a rank of the group did not reach it (stopped, or busy elsewhere)"
          : nccl_error_message(state, ("creating the NCCL communicator of " + describe_group(group)).c_str(), comm);
  ncclCommAbort(comm);
  throw NcclGroupFailure(why);
}

ncclComm_t NcclContext::comm_for(const Communicator& group) {
  {
    std::lock_guard<std::mutex> lock(comms_mutex_);
    auto it = comms_.find(group.id());
    if (it != comms_.end()) return it->second;
    if (failed_.load() && aborted_groups_.count(group.id()) != 0) return nullptr;
  }
  if (failed_.load()) {  // Note [An aborted rank still takes part in the host steps]
    share_unique_id(group, false);
    throw NcclGroupFailure(aborted_error());
  }
  ncclComm_t comm = create_comm(group);
  std::lock_guard<std::mutex> lock(comms_mutex_);
  comms_[group.id()] = comm;
  return comm;
}

ncclComm_t NcclContext::prepare(int device, const Communicator& group) {
  if (device_ >= 0) {
    if (device != device_) {
      throw NcclFailure("the NCCL communicators of this process were created on CUDA device " +
                        std::to_string(device_) + " but this tensor is on device " +
                        std::to_string(device) +
                        "; use one device per process (pin it by local rank)");
    }
    check_cuda(cudaSetDevice(device_), "cudaSetDevice");
  } else {
    check_cuda(cudaSetDevice(device), "cudaSetDevice");
    device_ = device;
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "creating the NCCL stream");
    finalizer_ = std::make_unique<NcclFinalizer>(
        device_, context_, [this] { return async_error(); },
        [this](const std::string& why) { abort_from_finalizer(why); }, context_.settings.liveness_timeout_seconds);
  }
  return comm_for(group);
}

ncclComm_t NcclContext::local_comm() { return comm_for(world_.local()); }

std::string NcclContext::async_error() const {
  std::lock_guard<std::mutex> lock(comms_mutex_);
  for (const auto& [id, comm] : comms_) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t rc = ncclCommGetAsyncError(comm, &state);
    if (rc != ncclSuccess) return nccl_error_message(rc, "ncclCommGetAsyncError", comm);
    if (state != ncclSuccess && state != ncclInProgress) {
      return nccl_error_message(state, "NCCL communicator failed asynchronously", comm);
    }
  }
  if (!comms_.empty()) return peer_abort_;
  return {};
}

void NcclContext::peer_aborted(const std::string& notice) {
  std::lock_guard<std::mutex> lock(comms_mutex_);
  if (peer_abort_.empty()) peer_abort_ = notice;
}

void NcclContext::abort_all(const std::string& why, bool tell_peers) {
  std::map<int, ncclComm_t> comms;
  {
    std::lock_guard<std::mutex> lock(comms_mutex_);
    tell_peers = tell_peers && peer_abort_.empty();  // else a peer told every rank already
    if (!failed_.load()) failure_ = why;
    failed_ = true;
    for (const auto& [id, comm] : comms_) aborted_groups_.insert(id);
    comms.swap(comms_);
  }
  for (const auto& [id, comm] : comms) ncclCommAbort(comm);
  if (comms.empty()) return;
  log_warn("NCCL communicators aborted: " + why);
  if (tell_peers && context_.report_abort)
    context_.report_abort("rank " + std::to_string(world_.rank()) + " aborted its NCCL communicators: " + why);
}

void NcclContext::abort_from_finalizer(const std::string& why) {
  auto lock = use();
  abort_all(why);
}

bool NcclContext::wait_stream(std::string* error) {
  const auto start = Clock::now();
  for (;;) {
    const cudaError_t state = cudaStreamQuery(stream_);
    if (state == cudaSuccess) return true;
    if (state != cudaErrorNotReady) {
      *error = std::string("waiting for the NCCL stream: CUDA error ") + cudaGetErrorName(state) + ": " +
               cudaGetErrorString(state);
      return false;
    }
    *error = async_error();
    const double limit = context_.settings.liveness_timeout_seconds;
    if (error->empty() && limit > 0 && std::chrono::duration<double>(Clock::now() - start).count() > limit)
      *error = "the NCCL stream did not finish within HOROVOD_LIVENESS_TIMEOUT_SECONDS=" + seconds(limit);
    if (!error->empty()) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// Finalizes every communicator (collective: the peers finalize theirs too), waits for them within
// one HOROVOD_START_TIMEOUT, then destroys them; aborts those that failed or did not finish.
void NcclContext::release(const std::map<int, ncclComm_t>& comms) {
  if (comms.empty()) return;  // also after the runtime's settings are gone (destructor)
  std::map<int, ncclResult_t> states;
  for (const auto& [id, comm] : comms) states[id] = ncclCommFinalize(comm);
  const auto deadline = Clock::now() + std::chrono::duration<double>(start_timeout() > 0 ? start_timeout() : 1e9);
  for (const auto& [id, comm] : comms) {
    ncclResult_t& state = states[id];
    while (state == ncclInProgress) {
      ncclResult_t async = ncclSuccess;
      if (ncclCommGetAsyncError(comm, &async) != ncclSuccess) async = ncclInternalError;
      state = async;
      if (state == ncclInProgress) {
        if (Clock::now() > deadline) {
          state = ncclSystemError;
          break;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
    if (state == ncclSuccess) {
      ncclCommDestroy(comm);
      continue;
    }
    log_warn("the NCCL communicator of group " + std::to_string(id) + " did not finalize within HOROVOD_START_TIMEOUT=" +
             seconds(start_timeout()) + " (a peer did not finalize it, or failed): aborted instead");
    ncclCommAbort(comm);
  }
}

void NcclContext::forget(const Communicator& group) {
  ncclComm_t comm = nullptr;
  {
    std::lock_guard<std::mutex> lock(comms_mutex_);
    aborted_groups_.erase(group.id());  // a later group with this id is created anew
    auto it = comms_.find(group.id());
    if (it == comms_.end()) return;
    comm = it->second;
    comms_.erase(it);
  }
  // Removal is refused while the set has operations in flight, so only finished work remains.
  std::string error;
  if (stream_ != nullptr && !wait_stream(&error)) {
    ncclCommAbort(comm);
    return;
  }
  release({{group.id(), comm}});
}

void* NcclContext::host_staging(std::size_t bytes) {
  if (bytes > staging_.capacity()) {
    std::string error;
    if (!wait_stream(&error)) throw NcclFailure(error);
  }
  return staging_.get(bytes);
}

void NcclContext::wait_for_inputs(const std::vector<TensorTableEntry>& entries) {
  for (const auto& entry : entries) {
    if (!entry.ready) continue;
    auto event = static_cast<cudaEvent_t>(entry.ready->cuda_event());
    if (event != nullptr) check_cuda(cudaStreamWaitEvent(stream_, event, 0), "cudaStreamWaitEvent");
  }
}

// See Tensor::allocation_event: the pool may have handed out memory still in use in its
// stream's order.
void NcclContext::wait_for_outputs(const std::vector<TensorTableEntry>& entries) {
  for (const auto& entry : entries) {
    if (!entry.output || entry.output == entry.input) continue;
    ReadyEventPtr allocated = entry.output->allocation_event();
    if (!allocated) continue;
    auto event = static_cast<cudaEvent_t>(allocated->cuda_event());
    if (event != nullptr) {
      check_cuda(cudaStreamWaitEvent(stream_, event, 0), "waiting for an output's allocation");
    } else {
      while (!allocated->ready()) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

void NcclContext::start_activity(const std::vector<TensorTableEntry>& entries, const char* activity) {
  for (const auto& entry : entries) context_.timeline.activity_start(entry.name, activity);
}

std::string entry_names(const std::vector<TensorTableEntry>& entries) {
  std::string names;
  for (const auto& entry : entries) names += (names.empty() ? "" : ", ") + entry.name;
  return names;
}

std::string NcclContext::label(const std::vector<TensorTableEntry>& entries, const char* op_name) const {
  return std::string("NCCL ") + op_name + " of [" + entry_names(entries) + "] on rank " + std::to_string(world_.rank());
}

// Note [A failed node step drains the stream before the host step]: the host step that follows
// reads and writes the host staging buffer, and the stream may still hold the copy into it behind
// a collective that a peer's failure left waiting (wait_stream() returns at the asynchronous
// error, not when the stream is done). After the abort that collective ends and the copy lands:
// waited for here, so it cannot land during the host step (TSan found the race, in the fault
// sweep's device Adasum cases) or in a later op's use of the buffer.
void NcclContext::finish_node_step(const std::vector<TensorTableEntry>& entries, const char* op_name, Launch& launch,
                                   const char* waiting_for) {
  std::string error;
  if (launch.ok() && !wait_stream(&error)) launch.fail(std::string("waiting for ") + waiting_for + ": " + error);
  if (launch.ok()) return;
  if (launch.shared_failure()) abort_all(label(entries, op_name) + " failed: " + launch.error());
  drain_stream();
}

void NcclContext::drain_stream() {
  // Aborted collectives end promptly (ncclCommAbort); a stream still busy after this is stuck.
  constexpr double kLimitSeconds = 10;
  const auto start = Clock::now();
  while (cudaStreamQuery(stream_) == cudaErrorNotReady) {
    if (std::chrono::duration<double>(Clock::now() - start).count() > kLimitSeconds) {
      log_warn("the NCCL stream still runs " + seconds(kLimitSeconds) +
               " after the communicators were aborted; the host staging buffer is used regardless");
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

Status NcclContext::finish_async(std::vector<TensorTableEntry>& entries, const char* op_name, const Launch& launch) {
  PendingGpuWork work;
  work.label = label(entries, op_name);
  work.error = launch.error();
  cudaError_t recorded = cudaErrorInvalidResourceHandle;
  try {
    work.done = finalizer_->acquire_event();
    recorded = cudaEventRecord(work.done, stream_);
  } catch (const NcclFailure&) {
  }
  // A failure every rank must see aborts the communicators after the event is recorded: the
  // aborted collectives end, and the stream runs to the event.
  if (launch.shared_failure()) abort_all(work.label + " failed: " + launch.error());
  if (recorded != cudaSuccess) {
    // No event to wait for: the stream cannot be trusted. Wait for it here before the entries
    // go back (see Note [Errors after NCCL work was enqueued]).
    const std::string error = work.error.empty() ? std::string("recording the NCCL completion event: CUDA error ") +
                                                       cudaGetErrorName(recorded)
                                                 : work.error;
    abort_all(work.label + " failed: " + error);
    std::string ignored;
    wait_stream(&ignored);
    if (work.done != nullptr) cudaEventDestroy(work.done);
    return Status::error(error);
  }
  work.entries = std::move(entries);  // the runtime is done with them once we return InProgress
  finalizer_->submit(std::move(work));
  return Status::in_progress();
}

void NcclContext::shutdown(WorldEnd end) {
  if (end == WorldEnd::Abandon) {
    auto lock = use();
    // The peers learned why from the watchdog already (Watchdog::stop(reason)).
    abort_all("this rank stopped alone, and its peers may wait for it inside a collective", false);
  }
  if (finalizer_) finalizer_->stop();
  auto lock = use();
  const std::string error = async_error();
  std::map<int, ncclComm_t> comms;
  {
    std::lock_guard<std::mutex> lock(comms_mutex_);
    comms.swap(comms_);
  }
  if (!error.empty()) {
    for (const auto& [id, comm] : comms) ncclCommAbort(comm);
  } else {
    release(comms);
  }
  if (stream_ != nullptr) {
    fusion_.release(stream_);
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
    stream_ = nullptr;
  }
  staging_.release();
  finalizer_.reset();
}

}  // namespace hvd::detail
