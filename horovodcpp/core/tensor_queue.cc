#include "core/tensor_queue.h"

#include <algorithm>
#include <tuple>

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

std::size_t TensorQueue::KeyHash::operator()(const Key& key) const {
  return std::hash<std::string>{}(key.second) ^ static_cast<std::size_t>(key.first);
}

std::optional<std::string> TensorQueue::add(std::vector<TensorTableEntry> entries, std::vector<Request> requests,
                                            const std::function<void(const std::vector<Request>&)>& accepted) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return closed_reason_;
  const bool burst = !table_.empty();
  // Each entry goes in with one lookup; when a name is refused (in flight already, or twice in
  // this call), the entries of this call added before it are taken out again, so the add stays
  // all or nothing. Keys are held by address: an insert may rehash, which moves no element but
  // invalidates iterators.
  std::vector<const Key*> added;
  added.reserve(entries.size() > 1 ? entries.size() : 0);  // a lone entry needs no list
  const Key* last = nullptr;
  auto take_back = [&] {
    if (last != nullptr) added.push_back(last);
    for (const Key* key : added) table_.erase(Key(*key));  // a copy: erase must not read the freed key
  };
  for (auto& e : entries) {
    Key key{e.process_set_id, std::move(e.name)};
    // try_emplace leaves `key` and `e` as they were when the name is there already.
    auto [it, fresh] = table_.try_emplace(std::move(key), std::move(e));
    if (!fresh) {
      take_back();
      const std::int32_t set = key.first;
      return "tensor '" + display_name(key.second) + "' is already in flight on this rank" +
             (set == 0 ? std::string() : " in process set " + std::to_string(set)) +
             ": names must be unique among pending operations (wait for the first before submitting it again)";
    }
    if (last != nullptr) added.push_back(last);
    last = &it->first;
  }
  if (accepted) {
    try {
      accepted(requests);
    } catch (...) {
      take_back();
      throw;
    }
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
  // The next cycle's submissions fill room for as many as the last held, instead of growing
  // the list (and moving every request) from nothing on the submitting threads.
  requests_.reserve(out.capacity());
  settle_.on_cycle_start();
  return out;
}

std::vector<TensorTableEntry> TensorQueue::take(const std::vector<std::string>& names, std::int32_t process_set_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<TensorTableEntry> out;
  out.reserve(names.size());
  Key probe{process_set_id, std::string()};  // one buffer for every name looked up
  for (const auto& n : names) {
    probe.second = n;
    auto it = table_.find(probe);
    if (it == table_.end()) continue;
    auto node = table_.extract(it);
    node.mapped().name = std::move(node.key().second);
    out.push_back(std::move(node.mapped()));
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
  return std::any_of(table_.begin(), table_.end(), [&](const auto& kv) { return kv.first.first == process_set_id; });
}

void TensorQueue::refuse_adds(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = true;
  closed_reason_ = reason;
}

std::vector<TensorTableEntry> TensorQueue::close(const std::string& reason) {
  refuse_adds(reason);
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<TensorTableEntry> out;
  out.reserve(table_.size());
  for (auto& [key, e] : table_) {
    out.push_back(std::move(e));
    out.back().name = key.second;
  }
  table_.clear();
  requests_.clear();
  // By set, then name, as when the table was ordered: a group's handle fails with its first
  // member's message.
  std::sort(out.begin(), out.end(), [](const TensorTableEntry& a, const TensorTableEntry& b) {
    return std::tie(a.process_set_id, a.name) < std::tie(b.process_set_id, b.name);
  });
  return out;
}

}  // namespace hvd::detail
