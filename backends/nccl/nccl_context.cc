#include "backends/nccl/nccl_context.h"

#include <cstring>

#include "backends/nccl/nccl_errors.h"
#include "timeline/timeline.h"

namespace hvd::detail {

NcclContext::NcclContext(World& world, OpContext& context) : world_(world), context_(context) {}

NcclContext::~NcclContext() { shutdown(); }

ncclComm_t NcclContext::create_comm(const Communicator& group) {
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
  ncclComm_t comm = nullptr;
  check_nccl(ncclCommInitRank(&comm, group.size(), id, group.rank()), "ncclCommInitRank");
  return comm;
}

ncclComm_t NcclContext::comm_for(const Communicator& group) {
  {
    std::lock_guard<std::mutex> lock(comms_mutex_);
    auto it = comms_.find(group.id());
    if (it != comms_.end()) return it->second;
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
    finalizer_ = std::make_unique<NcclFinalizer>(device_, context_, [this] { return async_error(); });
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
  return {};
}

void NcclContext::forget(const Communicator& group) {
  ncclComm_t comm = nullptr;
  {
    std::lock_guard<std::mutex> lock(comms_mutex_);
    auto it = comms_.find(group.id());
    if (it == comms_.end()) return;
    comm = it->second;
    comms_.erase(it);
  }
  // Removal is refused while the set has operations in flight, so only finished work remains.
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  ncclCommDestroy(comm);
}

void* NcclContext::host_staging(std::size_t bytes) {
  if (bytes > staging_.capacity()) check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  return staging_.get(bytes);
}

void NcclContext::wait_for_inputs(const std::vector<TensorTableEntry>& entries) {
  for (const auto& entry : entries) {
    if (!entry.ready) continue;
    auto event = static_cast<cudaEvent_t>(entry.ready->cuda_event());
    if (event != nullptr) check_cuda(cudaStreamWaitEvent(stream_, event, 0), "cudaStreamWaitEvent");
  }
}

void NcclContext::start_activity(const std::vector<TensorTableEntry>& entries, const char* activity) {
  for (const auto& entry : entries) context_.timeline.activity_start(entry.name, activity);
}

Status NcclContext::finish_async(std::vector<TensorTableEntry>& entries, const char* op_name) {
  PendingGpuWork work;
  std::string names;
  for (const auto& entry : entries) names += (names.empty() ? "" : ", ") + entry.name;
  work.label = std::string("NCCL ") + op_name + " of [" + names + "] on rank " +
               std::to_string(world_.rank());
  work.done = finalizer_->acquire_event();
  check_cuda(cudaEventRecord(work.done, stream_), "recording the NCCL completion event");
  work.entries = std::move(entries);  // the runtime is done with them once we return InProgress
  finalizer_->submit(std::move(work));
  return Status::in_progress();
}

void NcclContext::shutdown() {
  if (finalizer_) finalizer_->stop();
  const bool failed = !async_error().empty();
  std::map<int, ncclComm_t> comms;
  {
    std::lock_guard<std::mutex> lock(comms_mutex_);
    comms.swap(comms_);
  }
  for (const auto& [id, comm] : comms) {
    if (failed) {
      ncclCommAbort(comm);
    } else {
      ncclCommDestroy(comm);
    }
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
