// The narrow transport the Controller negotiates through. Rank 0 is the coordinator.
// Implemented over MPI in backends/mpi and over threads in tests (tests/unit/fake_channel.h).
// Used only by the background thread. Implementations must not busy-spin while they wait.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

namespace hvd::detail {

class ControlChannel {
 public:
  virtual ~ControlChannel() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Every rank sends its bytes; the coordinator gets one vector per rank, others get none.
  virtual std::vector<std::vector<std::uint8_t>> gather(const std::vector<std::uint8_t>& mine) = 0;
  // The coordinator's bytes reach every rank (the argument is ignored on other ranks).
  virtual std::vector<std::uint8_t> broadcast(const std::vector<std::uint8_t>& from_coordinator) = 0;
  // Element-wise bitwise AND across ranks, in place.
  virtual void bitwise_and(std::vector<std::uint64_t>& bits) = 0;
  // Element-wise bitwise OR across ranks, in place.
  virtual void bitwise_or(std::vector<std::uint64_t>& bits) = 0;

  // Idle mode: every rank calls this in the same cycle once all agreed there is nothing to do.
  // Returns on every rank soon after any rank has local work. `wait_for_local_work(timeout)`
  // blocks up to `timeout` and says whether this rank has work; it is how a rank sleeps.
  using LocalWorkWait = std::function<bool(std::chrono::microseconds timeout)>;
  virtual void idle_wait(const LocalWorkWait& wait_for_local_work) = 0;
};

}  // namespace hvd::detail
