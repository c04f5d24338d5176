#include "core/tensor_queue.h"

#include <algorithm>

namespace hvd::detail {
namespace {
thread_local int t_batch_depth = 0;  // open batches on this thread
}  // namespace

void TensorQueue::begin_batch() {
  if (t_batch_depth++ > 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  settle_.set_batches_open(++open_batches_);
}

void TensorQueue::end_batch() {
  if (t_batch_depth == 0 || --t_batch_depth > 0) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    settle_.set_batches_open(--open_batches_);
    if (!requests_.empty()) settle_.on_announce(std::chrono::steady_clock::now());
    ++wakes_;
  }
  requests_arrived_.notify_all();
}

std::optional<std::string> TensorQueue::add(std::vector<TensorTableEntry> entries, std::vector<Request> requests,
                                            const std::function<void(const std::vector<Request>&)>& accepted) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return closed_reason_;
  const bool burst = !table_.empty();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& name = entries[i].name;
    bool repeated_in_call = false;
    for (std::size_t j = 0; j < i; ++j) repeated_in_call |= entries[j].name == name;
    const std::int32_t set = entries[i].process_set_id;
    if (table_.count({set, name}) || repeated_in_call)
      return "tensor '" + display_name(name) + "' is already in flight on this rank" +
             (set == 0 ? std::string() : " in process set " + std::to_string(set)) +
             ": names must be unique among pending operations (wait for the first before submitting it again)";
  }
  if (accepted) accepted(requests);
  for (auto& e : entries) {
    Key key{e.process_set_id, e.name};
    table_.emplace(std::move(key), std::move(e));
  }
  for (auto& r : requests) requests_.push_back(std::move(r));
  const bool batched = t_batch_depth > 0;
  settle_.on_arrival(std::chrono::steady_clock::now(), burst && !batched);
  if (!batched) {
    ++wakes_;
    requests_arrived_.notify_all();
  }
  return std::nullopt;
}

bool TensorQueue::has_waiting_requests() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !requests_.empty();
}

std::vector<Request> TensorQueue::pop_requests() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Request> out;
  out.swap(requests_);
  settle_.on_cycle_start();
  return out;
}

std::vector<TensorTableEntry> TensorQueue::take(const std::vector<std::string>& names, std::int32_t process_set_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<TensorTableEntry> out;
  out.reserve(names.size());
  for (const auto& n : names) {
    auto it = table_.find({process_set_id, n});
    if (it == table_.end()) continue;
    out.push_back(std::move(it->second));
    table_.erase(it);
  }
  return out;
}

bool TensorQueue::wait_until_due(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    const auto now = std::chrono::steady_clock::now();
    const bool due = !requests_.empty() && now >= settle_.due();
    const bool woken = wakes_ != wakes_seen_;  // since the last wait returned, not only during this one
    wakes_seen_ = wakes_;
    if (due) return true;
    if (now >= deadline || woken) return false;
    // A new submission wakes the wait: it may be the first, or it moves the settle time.
    requests_arrived_.wait_until(lock, requests_.empty() ? deadline : std::min(deadline, settle_.due()));
  }
}

void TensorQueue::set_cycle_time_ms(double milliseconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  settle_.set_longest_hold(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double, std::milli>(milliseconds)));
}

void TensorQueue::set_ranks(int ranks) {
  std::lock_guard<std::mutex> lock(mutex_);
  settle_.set_ranks(ranks);
}

void TensorQueue::record_cycle_start(bool ahead_of_others) {
  std::lock_guard<std::mutex> lock(mutex_);
  settle_.record_start(ahead_of_others);
}

bool TensorQueue::has_entries(std::int32_t process_set_id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = table_.lower_bound({process_set_id, std::string()});
  return it != table_.end() && it->first.first == process_set_id;
}

std::vector<TensorTableEntry> TensorQueue::close(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = true;
  closed_reason_ = reason;
  std::vector<TensorTableEntry> out;
  for (auto& [name, e] : table_) out.push_back(std::move(e));
  table_.clear();
  requests_.clear();
  return out;
}

}  // namespace hvd::detail
