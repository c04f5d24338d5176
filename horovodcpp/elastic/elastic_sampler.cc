#include <algorithm>
#include <random>
#include <unordered_set>

#include "horovodcpp/elastic.h"

namespace hvd::elastic {
namespace {

// The epoch's order: a Fisher-Yates shuffle driven by mt19937_64, whose output the standard
// fixes, so every host computes the same order whatever its standard library.
std::vector<std::int64_t> epoch_order(std::int64_t n, bool shuffle, std::uint64_t seed,
                                      std::int64_t epoch) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i;
  if (!shuffle) return order;
  std::mt19937_64 engine(seed + static_cast<std::uint64_t>(epoch) * 0x9E3779B97F4A7C15ULL);
  for (std::int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<std::int64_t>(engine() % static_cast<std::uint64_t>(i + 1));
    std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
  }
  return order;
}

void check_batch_size(std::int64_t batch_size) {
  if (batch_size < 1)
    throw Error("ElasticSampler: batch_size " + std::to_string(batch_size) + " must be >= 1");
}

}  // namespace

ElasticSampler::ElasticSampler(std::int64_t dataset_size, bool shuffle, std::uint64_t seed)
    : dataset_size_(dataset_size), shuffle_(shuffle), seed_(seed) {
  if (dataset_size < 0)
    throw Error("ElasticSampler: dataset_size " + std::to_string(dataset_size) + " is negative");
  reshard_to_runtime();
}

void ElasticSampler::reshard_to_runtime() {
  if (is_initialized()) reshard(hvd::rank(), hvd::size());
  else reshard(rank_, size_);
}

void ElasticSampler::set_epoch(std::int64_t epoch) {
  if (epoch == epoch_) {
    if (is_initialized() && (hvd::rank() != rank_ || hvd::size() != size_)) reshard_to_runtime();
    return;
  }
  epoch_ = epoch;
  processed_.clear();
  remaining_.clear();
  done_in_layout_ = 0;
  reshard_to_runtime();
}

void ElasticSampler::reshard(int rank, int size) {
  if (size < 1 || rank < 0 || rank >= size)
    throw Error("ElasticSampler: rank " + std::to_string(rank) + " of size " +
                std::to_string(size) + " is out of range");
  processed_.insert(processed_.end(), remaining_.begin(), remaining_.begin() + done_in_layout_);
  const std::unordered_set<std::int64_t> seen(processed_.begin(), processed_.end());
  remaining_.clear();
  for (std::int64_t i : epoch_order(dataset_size_, shuffle_, seed_, epoch_))
    if (seen.count(i) == 0) remaining_.push_back(i);
  done_in_layout_ = 0;
  rank_ = rank;
  size_ = size;
}

std::int64_t ElasticSampler::num_batches(std::int64_t batch_size) const {
  check_batch_size(batch_size);
  const std::int64_t per_step = batch_size * size_;
  return (static_cast<std::int64_t>(remaining_.size()) + per_step - 1) / per_step;
}

std::vector<std::int64_t> ElasticSampler::batch(std::int64_t step, std::int64_t batch_size) const {
  check_batch_size(batch_size);
  const auto n = static_cast<std::int64_t>(remaining_.size());
  const std::int64_t start = std::min(n, step * batch_size * size_ + rank_ * batch_size);
  const std::int64_t end = std::min(n, start + batch_size);
  return std::vector<std::int64_t>(remaining_.begin() + start, remaining_.begin() + end);
}

void ElasticSampler::record_batch(std::int64_t step, std::int64_t batch_size) {
  check_batch_size(batch_size);
  const auto n = static_cast<std::int64_t>(remaining_.size());
  const std::int64_t expected = done_in_layout_ / (batch_size * size_);
  if (step != expected && done_in_layout_ < n)
    throw Error("ElasticSampler: record_batch(" + std::to_string(step) + ") but step " +
                std::to_string(expected) + " is the next one not recorded (record in order)");
  done_in_layout_ = std::min(n, (step + 1) * batch_size * size_);
}

std::int64_t ElasticSampler::processed_count() const {
  return static_cast<std::int64_t>(processed_.size()) + done_in_layout_;
}

std::vector<std::int64_t> ElasticSampler::save() const {
  std::vector<std::int64_t> out = {epoch_, static_cast<std::int64_t>(seed_), dataset_size_,
                                   shuffle_ ? 1 : 0};
  out.insert(out.end(), processed_.begin(), processed_.end());
  out.insert(out.end(), remaining_.begin(), remaining_.begin() + done_in_layout_);
  return out;
}

void ElasticSampler::load(const std::vector<std::int64_t>& saved) {
  if (saved.size() < 4 || saved[2] != dataset_size_ || (saved[3] != 0) != shuffle_ ||
      static_cast<std::uint64_t>(saved[1]) != seed_)
    throw Error("ElasticSampler: the saved sampler (dataset size " +
                (saved.size() < 4 ? std::string("?") : std::to_string(saved[2])) +
                ") does not match this one (dataset size " + std::to_string(dataset_size_) +
                ", same seed and shuffle needed)");
  epoch_ = saved[0];
  processed_.assign(saved.begin() + 4, saved.end());
  remaining_.clear();
  done_in_layout_ = 0;
  reshard_to_runtime();
}

}  // namespace hvd::elastic
