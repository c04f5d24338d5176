// The Runtime's process-set work: the global set's controller and the other sets' (made the same
// way), sets given at init, and add/remove at run time. Add and remove are BARRIER requests in
// the global set under reserved names; when their response comes, every rank runs it at the same
// point of the same cycle, so the collective creation of the set's communicators lines up.
#include <algorithm>

#include "core/logging.h"
#include "core/runtime.h"

namespace hvd::detail {
namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// A 64-bit digest of the sets' ranks (FNV-1a), for the agreement at init.
std::uint64_t digest(const std::vector<std::vector<int>>& sets) {
  std::uint64_t h = 1469598103934665603ULL;
  auto mix = [&h](std::uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ULL;
    }
  };
  mix(sets.size());
  for (const auto& set : sets) {
    mix(set.size());
    for (int r : set) mix(static_cast<std::uint64_t>(r));
  }
  return h;
}

}  // namespace

std::unique_ptr<Controller> Runtime::make_controller(const ProcessSetState& set) {
  ControllerOptions options = controller_options(settings_);
  if (set.id != 0) options.group = {set.ranks, describe_process_set(set.id, set.ranks)};
  return std::make_unique<Controller>(set.communicator->control(), options, &timeline_);
}

// Every rank checks the sets it was given; then the ranks compare them (a digest through one
// AND of it and of its complement) before any communicator is created, since creating one is
// collective over every rank.
std::string Runtime::create_initial_process_sets() {
  std::vector<std::vector<int>> sorted(initial_process_sets_.size());
  std::string local_error;
  for (std::size_t i = 0; i < initial_process_sets_.size() && local_error.empty(); ++i) {
    local_error = process_sets_.check_new_ranks(initial_process_sets_[i], topology_.size, &sorted[i]);
    for (std::size_t j = 0; j < i && local_error.empty(); ++j)
      if (sorted[j] == sorted[i]) local_error = "ranks " + ranks_string(initial_process_sets_[i]) + " are given twice";
    if (!local_error.empty()) local_error = "hvd::init(process_sets): set " + std::to_string(i + 1) + ", " + local_error;
  }
  std::string error = agree_on_init(local_error);
  if (!error.empty()) return error;
  const std::uint64_t mine = digest(sorted);
  std::vector<std::uint64_t> bits = {mine, ~mine};
  world_->control().bitwise_and(bits);
  if (bits[0] != mine || bits[1] != ~mine)
    return "hvd::init(process_sets): the ranks were given different process sets (this rank: " +
           std::to_string(sorted.size()) + " set(s)" +
           (sorted.empty() ? std::string() : ", the first " + ranks_string(sorted.front())) +
           "); every rank must pass the same sets in the same order";
  for (auto& ranks : sorted) {
    std::lock_guard<std::mutex> lock(process_sets_.mutex());
    ProcessSetState& set = process_sets_.add(ranks);
    set.owned = world_->create_communicator(set.id, set.ranks);
    set.communicator = set.owned.get();
    if (set.member()) set.controller = make_controller(set);
  }
  return {};
}

std::vector<int> Runtime::check_member(int process_set_id, const std::string& op) {
  ProcessSetState* set = process_sets_.find(process_set_id);
  if (set == nullptr)
    throw Error(op + ": process set " + std::to_string(process_set_id) +
                (process_sets_.was_removed(process_set_id) ? " was removed" : " is not registered"));
  if (!set->member())
    throw Error(op + ": rank " + std::to_string(topology_.rank) + " is not in " +
                describe_process_set(set->id, set->ranks) + "; only its ranks may submit to it");
  return set->ranks;
}

std::vector<int> Runtime::process_set_ranks(int process_set_id, const std::string& op) {
  std::lock_guard<std::mutex> lock(process_sets_.mutex());
  return check_member(process_set_id, op);
}

bool Runtime::find_process_set(int process_set_id, std::vector<int>* ranks) {
  std::lock_guard<std::mutex> lock(process_sets_.mutex());
  ProcessSetState* set = process_sets_.find(process_set_id);
  if (set == nullptr) return false;
  if (ranks != nullptr) *ranks = set->ranks;
  return true;
}

bool Runtime::is_process_set_change(const Response& response) const {
  if (response.names.size() != 1) return false;
  const std::string& name = response.names.front();
  return starts_with(name, kAddProcessSetPrefix) || starts_with(name, kRemoveProcessSetPrefix);
}

void Runtime::change_process_sets(const Response& response, std::vector<TensorTableEntry>& entries) {
  if (response.type == ResponseType::Error) {
    // Ranks that passed different ranks (or ids): the coordinator's mismatch message says which.
    finish(entries, Status::error(response.error));
    return;
  }
  const bool add = starts_with(response.names.front(), kAddProcessSetPrefix);
  int id = -1;
  Status status = Status::ok();
  try {
    status = add ? add_process_set(response, &id) : remove_process_set(response);
  } catch (const std::exception& e) {
    status = Status::error(e.what());
  }
  for (auto& e : entries)
    if (e.handle) e.handle->join_result = id;  // the new set's id, for add_process_set
  finish(entries, status);
}

Status Runtime::add_process_set(const Response& response, int* id) {
  const TensorShape& shape = response.shapes.at(0);
  std::vector<int> ranks(shape.begin(), shape.end());
  std::vector<int> sorted;
  // The table is the same on every rank, so every rank reaches the same verdict.
  std::string error = process_sets_.check_new_ranks(ranks, topology_.size, &sorted);
  if (!error.empty()) return Status::error("hvd::add_process_set: " + error);
  std::lock_guard<std::mutex> lock(process_sets_.mutex());
  ProcessSetState& set = process_sets_.add(sorted);
  set.owned = world_->create_communicator(set.id, set.ranks);
  set.communicator = set.owned.get();
  if (set.member()) set.controller = make_controller(set);
  *id = set.id;
  log_debug("added " + describe_process_set(set.id, set.ranks));
  return Status::ok();
}

// Refused on every rank when any rank has operations of the set in flight (the ranks learn
// which through one OR over the global set), so no rank drops a set its peers keep.
Status Runtime::remove_process_set(const Response& response) {
  const TensorShape& shape = response.shapes.at(0);
  const int id = shape.empty() ? -1 : static_cast<int>(shape.front());
  std::lock_guard<std::mutex> lock(process_sets_.mutex());
  ProcessSetState* set = process_sets_.find(id);
  if (id == 0) return Status::error("hvd::remove_process_set: the global process set cannot be removed");
  if (set == nullptr)
    return Status::error("hvd::remove_process_set: process set " + std::to_string(id) +
                         (process_sets_.was_removed(id) ? " was already removed" : " is not registered"));
  const bool busy = queue_.has_entries(id) || (set->controller && set->controller->busy());
  ControlChannel& channel = world_->control();
  std::vector<std::uint64_t> bits((channel.size() + 63) / 64, 0);
  if (busy) bits[channel.rank() / 64] |= std::uint64_t{1} << (channel.rank() % 64);
  channel.bitwise_or(bits);
  std::vector<int> busy_ranks;
  for (int r = 0; r < channel.size(); ++r)
    if ((bits[r / 64] >> (r % 64)) & 1) busy_ranks.push_back(r);
  if (!busy_ranks.empty())
    return Status::error("hvd::remove_process_set: " + describe_process_set(id, set->ranks) +
                         " still has operations in flight on rank" + (busy_ranks.size() > 1 ? "s " : " ") +
                         ranks_string(busy_ranks).substr(1, ranks_string(busy_ranks).size() - 2) +
                         "; wait for them before removing it");
  if (set->communicator != nullptr)
    for (auto& backend : backends_) backend->forget(*set->communicator);
  process_sets_.remove(id);
  return Status::ok();
}

}  // namespace hvd::detail
