// Everything the NCCL ops share: the device this process runs NCCL on, its dedicated stream, the
// global communicator (and the node-local one for hierarchical allreduce), the device fusion
// buffer, the host staging buffer and the finalizer thread.
//
// Communicators are created on the first device response rather than inside register_ops:
// at init the application has usually not yet chosen its device (it pins it by local rank after
// hvd::init), and a process without a GPU must still initialize. Every rank executes responses
// in the same order, so all ranks reach the creation together; rank 0's unique id is broadcast
// with MPI_Bcast on the world's global communicator. Owned by NcclBackend; background thread,
// except what the finalizer reads (the communicators, for asynchronous errors).
#pragma once

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "backends/nccl/device_buffers.h"
#include "backends/nccl/nccl_finalizer.h"
#include "core/collective_op.h"

namespace hvd::detail {

class MpiWorld;

class NcclContext {
 public:
  NcclContext(MpiWorld& world, OpContext& context);
  ~NcclContext();
  NcclContext(const NcclContext&) = delete;
  NcclContext& operator=(const NcclContext&) = delete;

  // Binds this process to `device` and creates the global communicator on first use; later
  // calls check the device is the same (one communicator per process). Throws NcclFailure.
  void prepare(int device);
  // The communicator among the ranks of this node; created on first use. Throws.
  ncclComm_t local_comm();

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  ncclComm_t comm() const { return comm_; }
  MpiWorld& world() { return world_; }
  OpContext& op_context() { return context_; }
  void* fusion_buffer(std::size_t bytes) { return fusion_.get(bytes, stream_); }
  // Pinned host memory; growing first waits for the stream, which may still copy from the old.
  void* host_staging(std::size_t bytes);

  // Makes the stream wait (on the GPU) for every entry's ready event.
  void wait_for_inputs(const std::vector<TensorTableEntry>& entries);
  // Opens `activity` on every entry's timeline row (closed by the finalizer).
  void start_activity(const std::vector<TensorTableEntry>& entries, const char* activity);
  // Records the completion event and hands the entries to the finalizer; returns InProgress.
  Status finish_async(std::vector<TensorTableEntry>& entries, const char* op_name);

  // Finishes outstanding work, then destroys communicators (aborts them after an error),
  // the stream and buffers. Background thread, before the world is finalized.
  void shutdown();

 private:
  ncclComm_t create_comm(MPI_Comm group, int nranks, int rank);
  std::string async_error() const;

  MpiWorld& world_;
  OpContext& context_;
  int device_ = -1;
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
  std::atomic<ncclComm_t> local_comm_{nullptr};
  DeviceFusionBuffer fusion_;
  PinnedHostBuffer staging_;
  std::unique_ptr<NcclFinalizer> finalizer_;
};

}  // namespace hvd::detail
