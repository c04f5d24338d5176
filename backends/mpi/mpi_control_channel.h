// ControlChannel over MPI on a dedicated communicator. Uses nonblocking collectives and waits
// with a short sleeping backoff instead of Open MPI's busy-polling blocking calls, so an idle
// or waiting background thread leaves the cores to training. Background thread only.
#pragma once

#include <mpi.h>

#include "core/control_channel.h"

namespace hvd::detail {

// Waits for a request by polling MPI_Test with exponential backoff sleeps (capped at ~1 ms).
void wait_without_spinning(MPI_Request* request);

class MpiControlChannel final : public ControlChannel {
 public:
  explicit MpiControlChannel(MPI_Comm comm);
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::vector<std::vector<std::uint8_t>> gather(const std::vector<std::uint8_t>& mine) override;
  std::vector<std::uint8_t> broadcast(const std::vector<std::uint8_t>& from_coordinator) override;
  void bitwise_and(std::vector<std::uint64_t>& bits) override;
  void bitwise_or(std::vector<std::uint64_t>& bits) override;
  // Rank 0 keeps one receive posted for wake-up messages; any rank with work sends one, and rank
  // 0 then releases everyone with a resume message. A stale wake-up left over from an earlier
  // idle period only costs one spurious cycle.
  void idle_wait(const LocalWorkWait& wait_for_local_work) override;
  // Cancels the posted wake-up receive; call before the communicator is freed.
  void close();

 private:
  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  MPI_Request wake_request_ = MPI_REQUEST_NULL;
  int wake_buffer_ = 0;
};

}  // namespace hvd::detail
