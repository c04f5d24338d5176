// LivenessChannel over MPI on a communicator of its own, so watchdog reports never match
// negotiation or data traffic. Nonblocking sends (one in flight per peer at most) and probes;
// used by the watchdog thread (send_abort_notice: any thread), concurrently with the background
// thread's MPI calls (the world requires MPI_THREAD_MULTIPLE).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <vector>

#include "core/liveness_channel.h"

namespace hvd::detail {

class MpiLivenessChannel final : public LivenessChannel {
 public:
  explicit MpiLivenessChannel(MPI_Comm comm);
  void send_waiting() override;
  std::vector<int> receive_reports() override;
  int send_failure(const std::string& reason, std::chrono::milliseconds patience) override;
  std::optional<FailureNotice> receive_failure() override;
  void send_failure_seen(int rank) override;
  void send_abort_notice(const std::string& notice) override;
  std::vector<std::string> receive_abort_notices() override;
  void send_set_failure_seen(int set_id, const std::vector<int>& ranks) override;
  std::vector<std::pair<int, int>> receive_set_failures_seen() override;
  // Drops undelivered reports and drains received ones; call before the communicator is freed.
  void close();

 private:
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  std::vector<MPI_Request> sends_;
  std::vector<std::uint64_t> payload_;
  std::string failure_;  // sent by send_failure(); outlives its sends
  struct Notice {
    MPI_Request request = MPI_REQUEST_NULL;
    std::int64_t set_id = 0;  // outlives its send
  };
  std::list<Notice> notices_;  // send_set_failure_seen()'s, until delivered
  struct AbortNotice {
    std::vector<MPI_Request> requests;
    std::string text;  // outlives its sends
  };
  std::mutex abort_notices_mutex_;          // send_abort_notice() may come from any thread
  std::list<AbortNotice> abort_notices_;  // send_abort_notice()'s, until delivered
};

}  // namespace hvd::detail
