// The narrow transport the Controller negotiates through. Rank 0 is the coordinator.
// Implemented over MPI in backends/mpi and over threads in tests (tests/unit/fake_channel.h).
// Used only by the background thread. Implementations must not busy-spin while they wait.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

namespace hvd::detail {

// What a rank waiting for the next cycle expects from the others, which sets how often it looks
// for another rank's request (each look wakes its background thread and takes a core from
// training for tens of microseconds).
enum class CycleExpectation {
  // This rank's submissions already wait on other ranks' (it is ahead of them), or wait here to
  // join the cycle of the last rank to submit while a user thread waits for them: that cycle
  // is due soon and worth looking for often.
  PeersDue,
  // Other ranks may start cycles that this rank brings nothing to and still must join (the
  // global cycles behind a process set this rank is not in), or this rank holds submissions
  // while its threads compute (a burst settling during backward).
  MayBeNeeded,
  // Every collective that can complete needs a submission of this rank, and a submission wakes
  // it at once: a cycle another rank starts earlier can wait for it. Looks are for rare events
  // only (a peer's shutdown, the stall inspector's heartbeat).
  OwnWorkFirst,
};

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

  // Cycle start. Between two negotiation cycles every rank waits here; it returns on every rank
  // once some rank asked for the next cycle, so cycles run only when some rank has work (no
  // timer). A rank asks when `wants_cycle(timeout)` returns true: it blocks up to `timeout`
  // (waking early for local work) and says whether this rank wants a cycle now; the channel
  // chooses the timeout, which is how often it looks for another rank's request. A rank that is
  // asked by another joins the cycle without being asked itself. `expecting()` says how soon
  // that may matter; it is asked again before every look (wants_cycle returns early when new
  // submissions arrive, which can change it).
  using CycleWanted = std::function<bool(std::chrono::microseconds timeout)>;
  using Expectation = std::function<CycleExpectation()>;
  virtual void wait_for_cycle_start(const CycleWanted& wants_cycle, const Expectation& expecting) = 0;
};

}  // namespace hvd::detail
