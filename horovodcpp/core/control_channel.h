// The narrow transport the Controller negotiates through. Rank 0 is the coordinator.
// Implemented over MPI in backends/mpi and over threads in tests (tests/unit/fake_channel.h).
// Used only by the background thread. Implementations must not busy-spin while they wait.
#pragma once

#include <cstdint>
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
};

}  // namespace hvd::detail
