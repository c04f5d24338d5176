#include "simulated_channel.h"

#include <algorithm>
#include <stdexcept>

#include "core/codec.h"

namespace hvd::bench {

SimulatedChannel::SimulatedChannel(int size) : size_(size) {
  if (size < 1) throw std::invalid_argument("SimulatedChannel: size must be >= 1");
}

const std::vector<std::uint8_t>& SimulatedChannel::peer_list(int r) const {
  static const std::vector<std::uint8_t> empty = detail::encode(detail::RequestList{});
  return static_cast<std::size_t>(r - 1) < peer_lists_.size() ? peer_lists_[r - 1] : empty;
}

std::vector<std::vector<std::uint8_t>> SimulatedChannel::gather(const std::vector<std::uint8_t>& mine) {
  std::vector<std::vector<std::uint8_t>> all;
  all.reserve(size_);
  all.push_back(mine);
  for (int r = 1; r < size_; ++r) all.push_back(peer_list(r));
  return all;
}

void SimulatedChannel::gather_each(const std::vector<std::uint8_t>& mine, const ListVisitor& visit) {
  visit(0, mine.data(), mine.size());
  for (int r = 1; r < size_; ++r) {
    // "Receive" each rank's list into the one buffer a receiving coordinator reuses.
    const auto& list = peer_list(r);
    received_list_.assign(list.begin(), list.end());
    visit(r, received_list_.data(), received_list_.size());
  }
}

std::vector<std::uint8_t> SimulatedChannel::broadcast(const std::vector<std::uint8_t>& from_coordinator) {
  return from_coordinator;
}

void SimulatedChannel::combine(std::vector<std::uint64_t>& bits, bool is_and) {
  const std::size_t words = bits.size();
  // "Receive" every simulated rank's words (the same as rank 0's), then fold them in.
  received_.resize(words * (size_ - 1));
  for (int r = 0; r + 1 < size_; ++r) std::copy(bits.begin(), bits.end(), received_.begin() + r * words);
  for (int r = 0; r + 1 < size_; ++r) {
    const std::uint64_t* from = received_.data() + r * words;
    for (std::size_t w = 0; w < words; ++w) bits[w] = is_and ? (bits[w] & from[w]) : (bits[w] | from[w]);
  }
}

namespace {
[[noreturn]] void no_cycle_starts() {
  throw std::logic_error("SimulatedChannel: the controller benchmark drives cycles itself");
}
}  // namespace

bool SimulatedChannel::start_arrived() { no_cycle_starts(); }
void SimulatedChannel::ask_to_start() { no_cycle_starts(); }
void SimulatedChannel::announce_start() { no_cycle_starts(); }
void SimulatedChannel::await_start() { no_cycle_starts(); }

}  // namespace hvd::bench
