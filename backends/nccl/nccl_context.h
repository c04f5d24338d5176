// Everything the NCCL ops share: the device this process runs NCCL on, its dedicated stream, one
// NCCL communicator per group (the world, each process set, the node-local group for
// hierarchical allreduce), the device fusion buffer, the host staging buffer and the finalizer.
//
// A group's communicator is created on its first device response rather than inside
// register_ops: at init the application has usually not yet chosen its device (it pins it by
// local rank after hvd::init), and a process without a GPU must still initialize. Every member
// executes the group's responses in the same order, so all reach the creation together; the
// group's rank 0 sends the unique id through the group's ControlChannel (no MPI call here).
// Owned by NcclBackend; background thread, except what the finalizer uses (under use(), and the
// communicators for asynchronous errors, under a lock).
//
// Note [Bounded NCCL communicator lifecycle]
// ncclCommInitRank waits for every rank of the group, and ncclCommDestroy (finalize) for every
// rank to be quiescent: a rank that never arrives (stopped, crashed, stuck elsewhere) blocks
// them forever. Communicators are therefore nonblocking (ncclConfig_t::blocking = 0): creation
// and finalize return ncclInProgress and are polled with ncclCommGetAsyncError for at most
// HOROVOD_START_TIMEOUT seconds, then aborted (creation fails naming the variable; a shutdown
// logs a warning and goes on). Any NCCL call on such a communicator may return ncclInProgress;
// it is settled the same way before the next call.
//
// Note [An aborted rank still takes part in the host steps]
// After its communicators were aborted, a rank's GPU ops still fail, but not before the steps
// they share with their peers on the host: creating a communicator (the unique id through the
// control channel), the alltoall split exchange, the cross-node steps of hierarchical allreduce
// and device Adasum. A peer whose own communicators still work (on another node, outside the
// process set that failed, or not told yet) runs those steps and would wait in them for this rank
// forever, or pair its next control message with another (found by test_nccl_fault_sweep_emulated).
// So the op runs its plan as usual, with nothing put on the stream (Launch starts failed): a
// group whose communicator this rank had gets nullptr, as its peers still have one; for any
// other, the peers are creating it, so this rank sends or receives the unique id and fails the
// op as they will when it never joins (NcclGroupFailure, within HOROVOD_START_TIMEOUT).
//
// Note [Peers learn of an abort from this rank]
// A rank that aborts its communicators for a failure that concerns its peers (a launch that
// failed before the collective, an asynchronous error, a timeout) leaves them waiting in the
// collective for it. Over a network NCCL reports that to them as ncclRemoteError; between the GPUs
// of one node (shared memory, NVLink) its kernels just wait, until HOROVOD_LIVENESS_TIMEOUT_SECONDS
// (30 min by default). So the rank also tells every other rank over the liveness channel
// (OpContext::report_abort), whose watchdog hands the notice to this class (peer_aborted) at its
// next tick: from then on it is their asynchronous error, with the first rank's reason
// (test_nccl_faults_abort_unseen_emulated, with the emulation told to keep aborts unseen). A rank
// that has such a notice passes on none of its own: every rank has one. A peer outside the failed
// rank's groups aborts too: every rank shares the world's communicator with it. A rank that stops
// alone (Note [An exception in the executor stops every rank]) aborts its communicators too; its
// failure report is the peers' notice.
//
// Note [One thread operates the communicators]
// NCCL allows one thread at a time per communicator. The background thread holds use() for the
// whole of an op; the finalizer takes it to abort the communicators after an asynchronous error,
// which then fails every later op at once (failure()).
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "backends/nccl/device_buffers.h"
#include "backends/nccl/nccl_finalizer.h"
#include "backends/nccl/nccl_launch.h"
#include "core/collective_op.h"

namespace hvd::detail {

// The entries' names, "a, b", for the NCCL ops' messages.
std::string entry_names(const std::vector<TensorTableEntry>& entries);

class NcclContext {
 public:
  NcclContext(World& world, OpContext& context);
  ~NcclContext();
  NcclContext(const NcclContext&) = delete;
  NcclContext& operator=(const NcclContext&) = delete;

  // See Note [One thread operates the communicators].
  std::unique_lock<std::mutex> use() { return std::unique_lock<std::mutex>(use_mutex_); }
  // Why the communicators were aborted; empty while they were not. Any thread.
  std::string failure() const;
  // The error of an op after the communicators were aborted; empty while they were not.
  std::string aborted_error() const;

  // Binds this process to `device` on first use and returns `group`'s communicator, created on
  // its first use; later calls check the device is the same (one device per process).
  // After an abort: nullptr, or NcclGroupFailure (Note [An aborted rank still takes part in the
  // host steps]). Throws NcclFailure. Caller holds use().
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

  // Makes the stream wait (on the GPU) for every entry's ready event, and for the allocation
  // event of every output (Tensor::allocation_event). Throws NcclFailure.
  void wait_for_inputs(const std::vector<TensorTableEntry>& entries);
  void wait_for_outputs(const std::vector<TensorTableEntry>& entries);
  // Waits on the host until the stream has run what is enqueued; false (with `error`) on an
  // asynchronous NCCL error or after HOROVOD_LIVENESS_TIMEOUT_SECONDS.
  bool wait_stream(std::string* error);
  // After a failed node step: waits (bounded) until the stream has run what was enqueued, the
  // aborted collectives included, whatever the asynchronous errors say.
  void drain_stream();
  // Polls a nonblocking communicator until it leaves ncclInProgress (bounded; see
  // Note [Bounded NCCL communicator lifecycle]): its state, or ncclSystemError after the bound.
  ncclResult_t settle(ncclComm_t comm);
  // Opens `activity` on every entry's timeline row (closed by the finalizer).
  void start_activity(const std::vector<TensorTableEntry>& entries, const char* activity);
  // Records the completion event and hands the entries to the finalizer with the launch's error,
  // if any (aborting the communicators when it concerns every rank); returns InProgress. See
  // Note [Errors after NCCL work was enqueued].
  Status finish_async(std::vector<TensorTableEntry>& entries, const char* op_name, const Launch& launch);
  // Before a host step that every rank joins (hierarchical allreduce, device Adasum across
  // nodes): waits until the stream has run this rank's node step (`waiting_for` names it in the
  // error). Then a failure of this rank's NCCL part that concerns its peers aborts the
  // communicators now rather than in finish_async(). A node peer may be waiting in a collective
  // for this rank; the abort ends its wait, so it reaches the host step too instead of each
  // waiting for the other.
  void finish_node_step(const std::vector<TensorTableEntry>& entries, const char* op_name, Launch& launch,
                        const char* waiting_for);
  // Aborts every communicator; later ops fail at once with `why`. Unless `tell_peers` is false or
  // a peer's notice arrived already, every other rank is told (OpContext::report_abort; Note
  // [Peers learn of an abort from this rank]). Caller holds use().
  void abort_all(const std::string& why, bool tell_peers = true);
  // Another rank aborted its communicators: reported from now on as this rank's asynchronous
  // error, so the finalizer aborts these (ending a wait for that rank) once an op waits, or
  // shutdown does. Any thread.
  void peer_aborted(const std::string& notice);

  // Finishes outstanding work, then releases communicators (bounded finalize, else abort), the
  // stream and buffers. Background thread, before the world is finalized. WorldEnd::Abandon (this
  // rank stopped alone; the peers may wait in a collective it never joins, and would never
  // finalize): the communicators are aborted first.
  void shutdown(WorldEnd end = WorldEnd::Finalize);
  // A process set is being removed: its communicator goes (after the stream's work is done).
  void forget(const Communicator& group);

 private:
  std::string label(const std::vector<TensorTableEntry>& entries, const char* op_name) const;
  ncclComm_t comm_for(const Communicator& group);  // created on first use
  ncclComm_t create_comm(const Communicator& group);
  // Through the group's control channel, with whether this rank joins; throws NcclGroupFailure
  // on the joining ranks when another refuses (Note [An aborted rank refuses new communicators at
  // once]).
  ncclUniqueId share_unique_id(const Communicator& group, bool joining);
  // Finalizes within the bound and destroys; aborts instead after an error or the bound.
  void release(const std::map<int, ncclComm_t>& comms);
  std::string async_error() const;
  void abort_from_finalizer(const std::string& why);
  double start_timeout() const;  // seconds; 0: no limit

  World& world_;
  OpContext& context_;
  int device_ = -1;
  cudaStream_t stream_ = nullptr;
  std::mutex use_mutex_;
  mutable std::mutex comms_mutex_;      // the finalizer reads comms_ for asynchronous errors
  std::map<int, ncclComm_t> comms_;     // by Communicator::id()
  std::set<int> aborted_groups_;        // ids whose communicators abort_all() aborted
  std::string peer_abort_;              // the first peer_aborted() notice
  std::string failure_;                 // under comms_mutex_
  std::atomic<bool> failed_{false};
  DeviceFusionBuffer fusion_;
  PinnedHostBuffer staging_;
  std::unique_ptr<NcclFinalizer> finalizer_;
};

}  // namespace hvd::detail
