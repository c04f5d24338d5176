#include "core/response_cache.h"

#include <algorithm>
#include <stdexcept>

namespace hvd::detail {

ResponseCache::Lookup ResponseCache::lookup(const Request& request) const {
  auto it = by_name_.find(request.name);
  if (it == by_name_.end()) return Lookup::Miss;
  return slots_[it->second].request.same_collective(request) ? Lookup::Hit : Lookup::Invalid;
}

std::optional<int> ResponseCache::slot_of(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

const Response& ResponseCache::response_at(int slot) const { return slots_.at(slot).response; }
const Request& ResponseCache::request_at(int slot) const { return slots_.at(slot).request; }

void ResponseCache::put(const Request& request, const Response& response) {
  if (capacity_ <= 0) return;
  if (auto existing = slot_of(request.name)) {
    Slot& s = slots_[*existing];
    s.request = request;
    s.response = response;
    touch(*existing);
    return;
  }
  if (static_cast<std::int64_t>(by_name_.size()) >= capacity_) erase(lru_.back());
  int slot;
  if (!free_slots_.empty()) {
    // Reuse the lowest free slot so every rank picks the same one.
    auto lowest = std::min_element(free_slots_.begin(), free_slots_.end());
    slot = *lowest;
    free_slots_.erase(lowest);
  } else {
    slot = static_cast<int>(slots_.size());
    slots_.emplace_back();
  }
  Slot& s = slots_[slot];
  s.used = true;
  s.request = request;
  s.response = response;
  lru_.push_front(slot);
  s.lru_position = lru_.begin();
  by_name_[request.name] = slot;
}

void ResponseCache::touch(int slot) {
  Slot& s = slots_.at(slot);
  if (!s.used) return;
  lru_.erase(s.lru_position);
  lru_.push_front(slot);
  s.lru_position = lru_.begin();
}

void ResponseCache::erase(int slot) {
  Slot& s = slots_.at(slot);
  if (!s.used) return;
  by_name_.erase(s.request.name);
  lru_.erase(s.lru_position);
  s = Slot{};
  free_slots_.push_back(slot);
}

void ResponseCache::clear() {
  slots_.clear();
  free_slots_.clear();
  lru_.clear();
  by_name_.clear();
}

}  // namespace hvd::detail
