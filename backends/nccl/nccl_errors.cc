#include "backends/nccl/nccl_errors.h"

namespace hvd::detail {

void check_cuda(cudaError_t result, const char* what) {
  if (result == cudaSuccess) return;
  throw NcclFailure(std::string(what) + ": CUDA error " + cudaGetErrorName(result) + ": " +
                    cudaGetErrorString(result));
}

std::string nccl_error_message(ncclResult_t result, const char* what, ncclComm_t comm) {
  std::string message = std::string(what) + ": NCCL error: " + ncclGetErrorString(result);
  const char* detail = ncclGetLastError(comm);
  if (detail != nullptr && detail[0] != '\0') message += std::string(" (") + detail + ")";
  return message;
}

void check_nccl(ncclResult_t result, const char* what, ncclComm_t comm) {
  if (result == ncclSuccess || result == ncclInProgress) return;
  throw NcclFailure(nccl_error_message(result, what, comm));
}

NcclGroup::NcclGroup() {
  check_nccl(ncclGroupStart(), "ncclGroupStart");
  open_ = true;
}

NcclGroup::~NcclGroup() {
  if (open_) ncclGroupEnd();
}

void NcclGroup::end(ncclComm_t comm) {
  open_ = false;
  check_nccl(ncclGroupEnd(), "ncclGroupEnd", comm);
}

}  // namespace hvd::detail
