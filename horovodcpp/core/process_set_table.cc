#include "core/process_set_table.h"

#include <algorithm>

namespace hvd::detail {

std::string ranks_string(const std::vector<int>& ranks) {
  std::string out = "[";
  for (std::size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out + "]";
}

std::string describe_process_set(int id, const std::vector<int>& ranks) {
  if (id == 0) return "the global process set";
  return "process set " + std::to_string(id) + " (ranks " + ranks_string(ranks) + ")";
}

std::string ProcessSetTable::check_new_ranks(const std::vector<int>& ranks, int world_size,
                                             std::vector<int>* sorted) const {
  const std::string given = "ranks " + ranks_string(ranks);
  if (ranks.empty()) return "a process set needs at least one rank (got " + given + ")";
  for (int r : ranks)
    if (r < 0 || r >= world_size)
      return given + ": rank " + std::to_string(r) + " is out of range [0, " + std::to_string(world_size) + ")";
  *sorted = ranks;
  std::sort(sorted->begin(), sorted->end());
  const auto repeated = std::adjacent_find(sorted->begin(), sorted->end());
  if (repeated != sorted->end()) return given + ": rank " + std::to_string(*repeated) + " is repeated";
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [id, set] : sets_)
    if (set->ranks == *sorted)
      return given + ": " + describe_process_set(id, set->ranks) + " already has these ranks";
  return {};
}

ProcessSetState* ProcessSetTable::find(int id) {
  auto it = sets_.find(id);
  return it == sets_.end() ? nullptr : it->second.get();
}

ProcessSetState& ProcessSetTable::add(std::vector<int> sorted_ranks) {
  auto set = std::make_unique<ProcessSetState>();
  set->id = next_id_++;
  set->ranks = std::move(sorted_ranks);
  ProcessSetState& out = *set;
  sets_[out.id] = std::move(set);
  return out;
}

ProcessSetState& ProcessSetTable::open(std::vector<int> sorted_ranks, World& world,
                                       const ControllerFactory& make_controller) {
  ProcessSetState& set = add(std::move(sorted_ranks));
  set.owned = world.create_communicator(set.id, set.ranks);
  set.communicator = set.owned.get();
  if (set.member()) set.controller = make_controller(set);
  return set;
}

void ProcessSetTable::remove(int id) { sets_.erase(id); }

std::vector<ProcessSetState*> ProcessSetTable::member_sets() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<ProcessSetState*> out;
  for (auto& [id, set] : sets_)
    if (set->member()) out.push_back(set.get());
  return out;
}

ProcessSetState* ProcessSetTable::next_member_set(int id) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = sets_.upper_bound(id); it != sets_.end(); ++it)
    if (it->second->member()) return it->second.get();
  return nullptr;
}

bool ProcessSetTable::some_set_excludes_this_rank() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [id, set] : sets_)
    if (!set->member()) return true;
  return false;
}

void ProcessSetTable::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [id, set] : sets_) {
    set->controller.reset();
    set->communicator = nullptr;
    set->owned.reset();
  }
}

}  // namespace hvd::detail
