#include "backends/nccl/nccl_launch.h"

#include "backends/nccl/nccl_context.h"
#include "backends/nccl/nccl_errors.h"

namespace hvd::detail {

Launch::Launch(NcclContext& nccl) : nccl_(nccl) {
  error_ = nccl_.aborted_error();
  shared_ = !error_.empty();
}

void Launch::fail(const std::string& error) {
  if (!ok()) return;
  error_ = error;
  shared_ = !after_collectives_;
}

void Launch::cuda_result(cudaError_t result, const char* what) {
  if (result == cudaSuccess) return;
  fail(std::string(what) + ": CUDA error " + cudaGetErrorName(result) + ": " + cudaGetErrorString(result));
}

void Launch::nccl_result(ncclResult_t result, const char* what, ncclComm_t comm) {
  if (result == ncclInProgress && group_depth_ == 0) result = nccl_.settle(comm);
  if (result == ncclSuccess || result == ncclInProgress) return;
  fail(nccl_error_message(result, what, comm));
  shared_ = true;  // an NCCL call that failed leaves the communicator in an unknown state
}

}  // namespace hvd::detail
