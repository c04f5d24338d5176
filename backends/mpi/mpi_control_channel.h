// ControlChannel over MPI on a dedicated communicator. Uses nonblocking collectives and waits
// with a short sleeping backoff instead of Open MPI's busy-polling blocking calls, so an idle
// or waiting background thread leaves the cores to training; it polls only where that takes no
// core from anyone (a user thread is blocked on the result). Background thread only.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "core/control_channel.h"

namespace hvd::detail {

// Waits for a request: polls MPI_Test for 50 us when `poll_first`, then sleeps with a doubling
// backoff (capped at 500 us) between tests.
void wait_without_spinning(MPI_Request* request, bool poll_first);

class MpiControlChannel final : public ControlChannel {
 public:
  // `receive_window`: how many request lists rank 0 receives at once in gather_each (tests set
  // fewer to exercise the reuse of its buffers).
  static constexpr int kDefaultReceiveWindow = 64;
  explicit MpiControlChannel(MPI_Comm comm, int receive_window = kDefaultReceiveWindow);
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::vector<std::vector<std::uint8_t>> gather(const std::vector<std::uint8_t>& mine) override;
  void gather_each(const std::vector<std::uint8_t>& mine, const ListVisitor& visit) override;
  std::vector<std::uint8_t> broadcast(const std::vector<std::uint8_t>& from_coordinator) override;
  void bitwise_and(std::vector<std::uint64_t>& bits) override;
  void bitwise_or(std::vector<std::uint64_t>& bits) override;
  // Cycle starts (the CyclePacer decides when): rank 0 keeps one receive posted for the other
  // ranks' wake-up messages and sends its start message to every other rank. Both carry the
  // cycle number, so a request for a cycle that already started (two ranks asked at once) is
  // recognized as stale and costs nothing.
  bool start_arrived() override;
  void ask_to_start() override;
  void announce_start() override;
  void await_start() override;
  // More ranks on this host than cores: a polling rank would take the core of the rank it
  // waits for, so waits sleep from the start. Set once by the world, for every channel.
  static void set_oversubscribed(bool oversubscribed);
  // Cancels the posted receives; call before the communicator is freed.
  void close();

 private:
  // Polls for up to 2 ms while a user thread is blocked in Handle::wait() (BlockedCallers);
  // otherwise, or after that, wait_without_spinning, polling first only if the previous wait
  // was short (the ranks in step).
  void wait(MPI_Request* request);
  std::vector<int> gather_sizes(int my_size);  // the first step of both gathers
  void post_start_receive();  // ranks other than 0: the start message of the next cycle
  void take_start();          // it arrived: checks its cycle number and counts the cycle

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  std::uint64_t cycles_started_ = 0;  // the same on every rank once the start arrived
  MPI_Request wake_request_ = MPI_REQUEST_NULL;  // rank 0
  std::uint64_t wake_buffer_ = 0;
  MPI_Request start_request_ = MPI_REQUEST_NULL;  // other ranks
  std::uint64_t start_buffer_ = 0;
  static std::atomic<bool> oversubscribed_;
  int receive_window_;
  std::vector<std::vector<std::uint8_t>> list_buffers_;  // rank 0: gather_each's, reused
  bool poll_next_wait_ = true;
  std::uint64_t sleeping_waits_ = 0;
};

}  // namespace hvd::detail
