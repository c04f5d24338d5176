// A ControlChannel for N simulated ranks in one process, one thread per rank. Every collective
// is a rendezvous: each rank deposits its bytes, the last to arrive releases everyone with the
// full set. Cycle starts work as over MPI: rank 0 announces each start, when it wants one or when
// another rank asked. Lets the Controller and the CyclePacer be tested without MPI.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/control_channel.h"

namespace hvd::test {

class Rendezvous {
 public:
  explicit Rendezvous(int size) : size_(size), slots_(size) {}
  // Returns every rank's contribution once all ranks have made theirs.
  std::vector<std::vector<std::uint8_t>> exchange(int rank, std::vector<std::uint8_t> mine) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return !releasing_; });  // the previous round is still being read
    slots_[rank] = std::move(mine);
    if (++arrived_ == size_) {
      result_ = slots_;
      releasing_ = true;
      leaving_ = size_;
      cv_.notify_all();
    } else {
      const auto round = round_;
      cv_.wait(lock, [&] { return releasing_ && round_ == round; });
    }
    auto out = result_;
    if (--leaving_ == 0) {
      arrived_ = 0;
      releasing_ = false;
      ++round_;
      cv_.notify_all();
    }
    return out;
  }
  int size() const { return size_; }

  // Cycle starts: asks for cycle `cycle` (a request for a cycle that started already is stale),
  // whether some rank asked for it, its announcement, and waiting for that.
  void ask(unsigned long cycle, int rank) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++asks_;
    if (asked_ > cycle) return;
    asked_ = cycle + 1;
    first_asker_ = rank;
  }
  bool asked(unsigned long cycle) {
    std::lock_guard<std::mutex> lock(mutex_);
    return asked_ > cycle;
  }
  void announce(unsigned long cycle) {
    std::lock_guard<std::mutex> lock(mutex_);
    starters_.push_back(asked_ > cycle ? first_asker_ : 0);  // rank 0 started it for its own work
    started_ = cycle + 1;
    cv_.notify_all();
  }
  bool started(unsigned long cycle) {
    std::lock_guard<std::mutex> lock(mutex_);
    return started_ > cycle;
  }
  void await_started(unsigned long cycle) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return started_ > cycle; });
  }
  unsigned long started_cycles() {
    std::lock_guard<std::mutex> lock(mutex_);
    return started_;
  }
  // Which rank asked first for each cycle that started (0 when rank 0 started it on its own).
  std::vector<int> starters() {
    std::lock_guard<std::mutex> lock(mutex_);
    return starters_;
  }
  int asks() {
    std::lock_guard<std::mutex> lock(mutex_);
    return asks_;
  }

 private:
  int size_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::vector<std::uint8_t>> slots_, result_;
  int arrived_ = 0, leaving_ = 0;
  bool releasing_ = false;
  unsigned long round_ = 0;
  unsigned long asked_ = 0;    // cycles asked for: every cycle below this one was asked for
  int first_asker_ = 0;        // of cycle asked_ - 1
  unsigned long started_ = 0;  // cycles announced
  int asks_ = 0;
  std::vector<int> starters_;
};

class FakeChannel final : public detail::ControlChannel {
 public:
  FakeChannel(std::shared_ptr<Rendezvous> rendezvous, int rank) : rendezvous_(std::move(rendezvous)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return rendezvous_->size(); }
  std::vector<std::vector<std::uint8_t>> gather(const std::vector<std::uint8_t>& mine) override {
    auto all = rendezvous_->exchange(rank_, mine);
    if (rank_ != 0) all.clear();
    return all;
  }
  std::vector<std::uint8_t> broadcast(const std::vector<std::uint8_t>& from_coordinator) override {
    return rendezvous_->exchange(rank_, rank_ == 0 ? from_coordinator : std::vector<std::uint8_t>{})[0];
  }
  void bitwise_and(std::vector<std::uint64_t>& bits) override { combine(bits, true); }
  void bitwise_or(std::vector<std::uint64_t>& bits) override { combine(bits, false); }
  bool start_arrived() override {
    if (rank_ == 0) return rendezvous_->asked(cycles_started_);
    if (!rendezvous_->started(cycles_started_)) return false;
    ++cycles_started_;
    return true;
  }
  void ask_to_start() override { rendezvous_->ask(cycles_started_, rank_); }
  void announce_start() override { rendezvous_->announce(cycles_started_++); }
  void await_start() override {
    ++awaited_;
    rendezvous_->await_started(cycles_started_++);
  }
  int bit_rounds() const { return bit_rounds_; }
  int awaited_starts() const { return awaited_; }  // await_start() calls

 private:
  void combine(std::vector<std::uint64_t>& bits, bool is_and) {
    ++bit_rounds_;
    std::vector<std::uint8_t> raw(bits.size() * 8);
    std::memcpy(raw.data(), bits.data(), raw.size());
    auto all = rendezvous_->exchange(rank_, raw);
    for (std::size_t w = 0; w < bits.size(); ++w) {
      std::uint64_t acc = is_and ? ~std::uint64_t{0} : 0;
      for (const auto& r : all) {
        std::uint64_t v;
        std::memcpy(&v, r.data() + w * 8, 8);
        acc = is_and ? (acc & v) : (acc | v);
      }
      bits[w] = acc;
    }
  }
  std::shared_ptr<Rendezvous> rendezvous_;
  int rank_;
  int bit_rounds_ = 0;
  int awaited_ = 0;
  unsigned long cycles_started_ = 0;
};

}  // namespace hvd::test
