// The enqueue phase of one NCCL op: every CUDA or NCCL call that puts work on the stream goes
// through here, runs only while nothing has failed, and never throws. The op's first failure is
// kept and reported once the stream has run what was enqueued. Background thread, under
// NcclContext::use().
//
// Note [Errors after NCCL work was enqueued]
// An op runs in two phases. Its plan (the communicator, output allocation, split exchange, the
// fusion buffer, the waits for input and output events) may throw: nothing that writes a tensor
// is on the stream yet, so the error can end the op at once. Only a failure to create the
// communicator is the same on every rank (NcclGroupFailure: the op fails, the job goes on); any
// other may be this rank's alone while its peers wait in the collective, so it stops the job
// (nccl_errors.h). From the first launch on,
// returning early would let the runtime complete the handles while the stream still reads and
// writes the tensors (the caller frees or reuses them), and would leave this rank's collectives
// short of its peers'. So the enqueue phase records its first failure and stops issuing work; the
// op still records its completion event, and the finalizer completes the entries with the error
// only after the stream got there. A failure before the last collective (a kernel that did not
// launch, an NCCL call that failed) concerns every rank: the peers' collective would wait for
// this rank or reduce its garbage, so the communicators are aborted (NcclContext::abort_all) and
// every later GPU op fails, enqueueing nothing (Note [An aborted rank still takes part in the
// host steps]). A failure after the last collective (copying out, postscale) concerns this
// rank's outputs only: the communicators stay.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

namespace hvd::detail {

class NcclContext;

class Launch {
 public:
  // Starts failed after the communicators were aborted: the op still runs its host steps (Note
  // [An aborted rank still takes part in the host steps]) but enqueues nothing.
  explicit Launch(NcclContext& nccl);

  // Work of this rank alone: copies, scaling, memsets.
  template <class F>
  void local(const char* what, F&& enqueue) {
    if (ok()) cuda_result(enqueue(), what);
  }
  // One NCCL call; outside a group, a nonblocking communicator's ncclInProgress is settled.
  template <class F>
  void collective(const char* what, ncclComm_t comm, F&& enqueue) {
    if (ok()) nccl_result(enqueue(), what, comm);
  }
  // Calls inside ncclGroupStart/End; the group is closed even when a call in it failed.
  template <class F>
  void group(ncclComm_t comm, F&& calls) {
    if (!ok()) return;
    nccl_result(ncclGroupStart(), "ncclGroupStart", comm);
    if (!ok()) return;
    ++group_depth_;
    calls();
    --group_depth_;
    const ncclResult_t end = ncclGroupEnd();
    if (ok()) nccl_result(end, "ncclGroupEnd", comm);
  }
  // A step the op met outside CUDA and NCCL (the cross-node MPI allreduce, a stream wait).
  void fail(const std::string& error);
  // From here on a failure concerns this rank's outputs only.
  void collectives_done() { after_collectives_ = true; }

  bool ok() const { return error_.empty(); }
  bool shared_failure() const { return !ok() && shared_; }
  const std::string& error() const { return error_; }

 private:
  void cuda_result(cudaError_t result, const char* what);
  void nccl_result(ncclResult_t result, const char* what, ncclComm_t comm);

  NcclContext& nccl_;
  std::string error_;
  bool shared_ = false;
  bool after_collectives_ = false;
  int group_depth_ = 0;
};

}  // namespace hvd::detail
