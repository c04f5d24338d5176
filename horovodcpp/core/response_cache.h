// Remembers the responses of tensors negotiated before, so that a tensor submitted again with
// the same parameters skips the gather to the coordinator (a cache bit instead). Every rank's
// cache receives the same puts, touches and evictions in the same order, so slot numbers agree
// across ranks. LRU at HOROVOD_CACHE_CAPACITY entries. Background thread only.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/message.h"

namespace hvd::detail {

class ResponseCache {
 public:
  enum class Lookup { Miss, Hit, Invalid };  // Invalid: same name, different parameters

  explicit ResponseCache(std::int64_t capacity) : capacity_(capacity) {}

  std::int64_t capacity() const { return capacity_; }
  std::size_t size() const { return by_name_.size(); }
  // Number of bit positions in use (slots are reused after eviction).
  std::size_t slot_count() const { return slots_.size(); }

  Lookup lookup(const Request& request) const;
  std::optional<int> slot_of(const std::string& name) const;
  const Response& response_at(int slot) const;
  const Request& request_at(int slot) const;  // this rank's request that filled the slot

  // Inserts or refreshes (most recently used); evicts the least recently used when full.
  void put(const Request& request, const Response& response);
  void touch(int slot);
  void erase(int slot);
  void clear();  // every entry and slot: the cache starts over

 private:
  struct Slot {
    bool used = false;
    Request request;
    Response response;
    std::list<int>::iterator lru_position;
  };
  std::int64_t capacity_;
  std::vector<Slot> slots_;
  std::vector<int> free_slots_;
  std::list<int> lru_;  // front: most recent
  std::unordered_map<std::string, int> by_name_;  // hashed: looked up several times per request and cycle
};

}  // namespace hvd::detail
