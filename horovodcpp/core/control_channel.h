// The narrow transport the Controller negotiates through. Rank 0 is the coordinator.
// Implemented over MPI in backends/mpi and over threads in tests (tests/unit/fake_channel.h).
// Used only by the background thread. Implementations must not busy-spin while they wait.
#pragma once

#include <cstddef>
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
  // The same gather, seen by the coordinator one rank at a time: `visit(rank, bytes, size)` runs
  // for every rank in rank order, and the bytes are valid only during the call, so a channel
  // can receive each rank's into a buffer it reuses instead of holding all of them (at
  // thousands of ranks that is tens of MB, read once, from memory rather than cache). The
  // default gathers, then visits.
  using ListVisitor = std::function<void(int rank, const std::uint8_t* bytes, std::size_t size)>;
  virtual void gather_each(const std::vector<std::uint8_t>& mine, const ListVisitor& visit) {
    const auto all = gather(mine);
    for (std::size_t r = 0; r < all.size(); ++r) visit(static_cast<int>(r), all[r].data(), all[r].size());
  }
  // The coordinator's bytes reach every rank (the argument is ignored on other ranks).
  virtual std::vector<std::uint8_t> broadcast(const std::vector<std::uint8_t>& from_coordinator) = 0;
  // Element-wise bitwise AND across ranks, in place.
  virtual void bitwise_and(std::vector<std::uint64_t>& bits) = 0;
  // Element-wise bitwise OR across ranks, in place.
  virtual void bitwise_or(std::vector<std::uint64_t>& bits) = 0;
  // Every rank says whether it is flagged; every rank gets the flagged ranks, in order (one
  // bitwise_or of a bit per rank).
  std::vector<int> flagged_ranks(bool flagged) {
    std::vector<std::uint64_t> bits((size() + 63) / 64, 0);
    if (flagged) bits[rank() / 64] |= std::uint64_t{1} << (rank() % 64);
    bitwise_or(bits);
    std::vector<int> ranks;
    for (int r = 0; r < size(); ++r)
      if ((bits[r / 64] >> (r % 64)) & 1) ranks.push_back(r);
    return ranks;
  }

  // Cycle start, the mechanism only: when to look and when to ask is the CyclePacer's (core/
  // cycle_pacer.h). The coordinator (rank 0) starts every cycle by announcing it to every other
  // rank, when it wants a cycle itself or when another rank asked it to.
  //
  // Coordinator: whether some rank asked for the next cycle since the last announcement (a request
  // for a cycle that already started is stale and ignored). Other ranks: whether the coordinator
  // announced the next cycle; true once per cycle, and throws when the ranks are out of step.
  virtual bool start_arrived() = 0;
  // Other ranks: asks the coordinator to start the next cycle (then the start arrives).
  virtual void ask_to_start() = 0;
  // Coordinator: the next cycle starts, on every rank.
  virtual void announce_start() = 0;
  // Other ranks, after ask_to_start(): blocks until the start arrives, waiting as the channel's
  // collectives wait.
  virtual void await_start() = 0;
};

}  // namespace hvd::detail
