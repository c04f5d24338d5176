#include "backends/mpi/mpi_liveness_channel.h"

namespace hvd::detail {
namespace {
constexpr int kWaitingTag = 7101;
}

MpiLivenessChannel::MpiLivenessChannel(MPI_Comm comm) : comm_(comm) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  sends_.assign(size_, MPI_REQUEST_NULL);
  payload_.assign(size_, 0);
}

void MpiLivenessChannel::send_waiting() {
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    if (sends_[r] != MPI_REQUEST_NULL) {
      int done = 0;
      MPI_Test(&sends_[r], &done, MPI_STATUS_IGNORE);
      if (!done) continue;
    }
    ++payload_[r];
    MPI_Isend(&payload_[r], 1, MPI_UINT64_T, r, kWaitingTag, comm_, &sends_[r]);
  }
}

std::vector<int> MpiLivenessChannel::receive_reports() {
  std::vector<int> from;
  while (true) {
    int arrived = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kWaitingTag, comm_, &arrived, &status) != MPI_SUCCESS || !arrived) break;
    std::uint64_t value = 0;
    MPI_Recv(&value, 1, MPI_UINT64_T, status.MPI_SOURCE, kWaitingTag, comm_, MPI_STATUS_IGNORE);
    from.push_back(status.MPI_SOURCE);
  }
  return from;
}

void MpiLivenessChannel::close() {
  for (auto& request : sends_) {
    if (request == MPI_REQUEST_NULL) continue;
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (!done) {
      MPI_Cancel(&request);
      MPI_Request_free(&request);
    }
  }
  receive_reports();
}

}  // namespace hvd::detail
