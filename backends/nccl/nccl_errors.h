// Turns CUDA and NCCL return codes into exceptions that carry the library's own message. Thrown
// only inside the NCCL backend, by an op's plan (see Note [Errors after NCCL work was enqueued]).
// Stateless; any thread.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <stdexcept>
#include <string>

namespace hvd::detail {

// A CUDA or NCCL call failed; what() is the full message. It may be this rank's alone (an output
// that could not be allocated here), so an op's execute() lets it through and the rank stops the
// job (Note [An exception in the executor stops every rank]): its peers may already wait in the
// op's collective, and a later collective of this rank would pair with theirs.
class NcclFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A failure every rank of the group meets alike, at the same point of the agreed response order:
// creating the group's communicator (every rank that arrived fails it; the next op tries again).
// execute() returns it as the op's Status, and the job goes on.
class NcclGroupFailure : public NcclFailure {
 public:
  using NcclFailure::NcclFailure;
};

// Throws NcclFailure "<what>: CUDA error <name>: <cudaGetErrorString>".
void check_cuda(cudaError_t result, const char* what);
// Throws NcclFailure "<what>: NCCL error: <ncclGetErrorString> (<ncclGetLastError>)".
void check_nccl(ncclResult_t result, const char* what, ncclComm_t comm = nullptr);
// The message check_nccl would use, without throwing.
std::string nccl_error_message(ncclResult_t result, const char* what, ncclComm_t comm);

// ncclGroupStart on construction; end() closes the group and checks it. If an exception leaves
// the scope first, the destructor still closes the group so later NCCL calls are not swallowed
// into it.
class NcclGroup {
 public:
  NcclGroup();
  ~NcclGroup();
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;
  void end(ncclComm_t comm);

 private:
  bool open_ = false;
};

}  // namespace hvd::detail
