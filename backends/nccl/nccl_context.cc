#include "backends/nccl/nccl_context.h"

#include "backends/mpi/mpi_world.h"
#include "backends/nccl/nccl_errors.h"
#include "timeline/timeline.h"

namespace hvd::detail {

NcclContext::NcclContext(MpiWorld& world, OpContext& context) : world_(world), context_(context) {}

NcclContext::~NcclContext() { shutdown(); }

ncclComm_t NcclContext::create_comm(MPI_Comm group, int nranks, int rank) {
  ncclUniqueId id{};
  if (rank == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  const int rc = MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, group);
  if (rc != MPI_SUCCESS) throw NcclFailure("broadcasting the NCCL unique id over MPI failed");
  ncclComm_t comm = nullptr;
  check_nccl(ncclCommInitRank(&comm, nranks, id, rank), "ncclCommInitRank");
  return comm;
}

void NcclContext::prepare(int device) {
  if (comm_ != nullptr) {
    if (device != device_) {
      throw NcclFailure("the NCCL communicator of this process was created on CUDA device " +
                        std::to_string(device_) + " but this tensor is on device " +
                        std::to_string(device) +
                        "; use one device per process (pin it by local rank)");
    }
    check_cuda(cudaSetDevice(device_), "cudaSetDevice");
    return;
  }
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  device_ = device;
  check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "creating the NCCL stream");
  comm_ = create_comm(world_.global_comm(), world_.size(), world_.rank());
  finalizer_ = std::make_unique<NcclFinalizer>(device_, context_, [this] { return async_error(); });
}

ncclComm_t NcclContext::local_comm() {
  ncclComm_t comm = local_comm_.load();
  if (comm == nullptr) {
    comm = create_comm(world_.local_comm(), world_.local_size(), world_.local_rank());
    local_comm_.store(comm);
  }
  return comm;
}

std::string NcclContext::async_error() const {
  for (ncclComm_t comm : {comm_, local_comm_.load()}) {
    if (comm == nullptr) continue;
    ncclResult_t state = ncclSuccess;
    const ncclResult_t rc = ncclCommGetAsyncError(comm, &state);
    if (rc != ncclSuccess) return nccl_error_message(rc, "ncclCommGetAsyncError", comm);
    if (state != ncclSuccess && state != ncclInProgress) {
      return nccl_error_message(state, "NCCL communicator failed asynchronously", comm);
    }
  }
  return {};
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
  for (ncclComm_t comm : {comm_, local_comm_.load()}) {
    if (comm == nullptr) continue;
    if (failed) {
      ncclCommAbort(comm);
    } else {
      ncclCommDestroy(comm);
    }
  }
  comm_ = nullptr;
  local_comm_.store(nullptr);
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
