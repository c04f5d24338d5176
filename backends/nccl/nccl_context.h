// Everything the NCCL ops share: the device this process runs NCCL on, its dedicated stream, one
// NCCL communicator per group (the world, each process set, the node-local group for
// hierarchical allreduce), the device fusion buffer, the host staging buffer and the finalizer.
//
// A group's communicator is created on its first device response rather than inside
// register_ops: at init the application has usually not yet chosen its device (it pins it by
// local rank after hvd::init), and a process without a GPU must still initialize. Every member
// executes the group's responses in the same order, so all reach the creation together; the
// group's rank 0 sends the unique id through the group's ControlChannel (no MPI call here).
// Owned by NcclBackend; background thread, except what the finalizer reads (the communicators,
// for asynchronous errors, under a lock).
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <map>
#include <mutex>
#include <memory>
#include <string>
#include <vector>

#include "backends/nccl/device_buffers.h"
#include "backends/nccl/nccl_finalizer.h"
#include "core/collective_op.h"

namespace hvd::detail {

class NcclContext {
 public:
  NcclContext(World& world, OpContext& context);
  ~NcclContext();
  NcclContext(const NcclContext&) = delete;
  NcclContext& operator=(const NcclContext&) = delete;

  // Binds this process to `device` on first use and returns `group`'s communicator, created on
  // its first use; later calls check the device is the same (one device per process).
  // Throws NcclFailure.
  ncclComm_t prepare(int device, const Communicator& group);
  // The communicator among the ranks of this node; created on first use. Throws.
  ncclComm_t local_comm();

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  World& world() { return world_; }
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
  // A process set is being removed: its communicator goes (after the stream's work is done).
  void forget(const Communicator& group);

 private:
  ncclComm_t comm_for(const Communicator& group);  // created on first use
  ncclComm_t create_comm(const Communicator& group);
  std::string async_error() const;

  World& world_;
  OpContext& context_;
  int device_ = -1;
  cudaStream_t stream_ = nullptr;
  mutable std::mutex comms_mutex_;      // the finalizer reads comms_ for asynchronous errors
  std::map<int, ncclComm_t> comms_;     // by Communicator::id()
  DeviceFusionBuffer fusion_;
  PinnedHostBuffer staging_;
  std::unique_ptr<NcclFinalizer> finalizer_;
};

}  // namespace hvd::detail
