// A ControlChannel that plays rank 0 (the coordinator) of an N-rank job for one real
// Controller, and synthesizes what the other N-1 ranks would contribute, so negotiation can be
// measured at 1024 ranks in one process. The simulated ranks are in the same state as rank 0
// (they submit the same tensors), as in a data-parallel step:
//   gather     rank 0's bytes plus a copy of each simulated rank's encoded request list
//   gather_each  each simulated rank's list copied in turn into one reused buffer, as the MPI
//              channel receives them (backends/mpi/mpi_control_channel.cc)
//   broadcast  returns the coordinator's bytes (what every rank would receive)
//   bitwise_*  combines rank 0's words with N-1 received copies, one rank at a time (what a
//              root would do; MPI's tree does log2(N) such combines, so this over-counts)
// Network latency is not simulated: the figures are the coordinator's own work per cycle.
// Used by the controller benchmark's main thread; owns copies of the simulated ranks' lists.
#pragma once

#include <cstdint>
#include <vector>

#include "core/control_channel.h"

namespace hvd::bench {

class SimulatedChannel final : public detail::ControlChannel {
 public:
  explicit SimulatedChannel(int size);

  // What simulated rank r (1..N-1) sends when the controller gathers: encoded RequestLists.
  // Empty lists are used when none were set.
  void set_peer_lists(std::vector<std::vector<std::uint8_t>> lists) { peer_lists_ = std::move(lists); }

  int rank() const override { return 0; }
  int size() const override { return size_; }
  std::vector<std::vector<std::uint8_t>> gather(const std::vector<std::uint8_t>& mine) override;
  void gather_each(const std::vector<std::uint8_t>& mine, const ListVisitor& visit) override;
  std::vector<std::uint8_t> broadcast(const std::vector<std::uint8_t>& from_coordinator) override;
  void bitwise_and(std::vector<std::uint64_t>& bits) override { combine(bits, true); }
  void bitwise_or(std::vector<std::uint64_t>& bits) override { combine(bits, false); }
  // Never reached: the benchmark drives compute_response_list itself (each throws).
  bool start_arrived() override;
  void ask_to_start() override;
  void announce_start() override;
  void await_start() override;

 private:
  void combine(std::vector<std::uint64_t>& bits, bool is_and);
  // What simulated rank r sends: its list, or an empty one when none was set.
  const std::vector<std::uint8_t>& peer_list(int r) const;
  int size_;
  std::vector<std::vector<std::uint8_t>> peer_lists_;  // index r - 1
  std::vector<std::uint64_t> received_;               // N-1 copies of the words, back to back
  std::vector<std::uint8_t> received_list_;           // gather_each's receive buffer
};

}  // namespace hvd::bench
