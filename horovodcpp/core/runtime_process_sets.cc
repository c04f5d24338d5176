// The Runtime's process-set work: the global set's controller and the other sets' (made the same
// way), the sets given at init, and the membership checks of submissions. Sets added and removed
// at run time are the Executor's (executor.h).

#include "core/logging.h"
#include "core/runtime.h"
#include "core/stopped.h"

namespace hvd::detail {
namespace {

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
    process_sets_.open(std::move(ranks), *world_, [this](const ProcessSetState& set) { return make_controller(set); });
  }
  return {};
}

const std::vector<int>& Runtime::check_member(int process_set_id, const std::function<std::string()>& op) {
  ProcessSetState* set = process_sets_.find(process_set_id);
  if (set == nullptr)
    throw InvalidArgument(op() + ": process set " + std::to_string(process_set_id) +
                          (process_sets_.was_removed(process_set_id) ? " was removed" : " is not registered"));
  // A stopped runtime released its sets' communicators (ProcessSetTable::clear): a submission
  // racing with the stop gets the stop's reason, not a wrong "not in the set".
  if (!set->member() && !running()) throw Error(op() + ": " + stopped_message(stop_reason()));
  if (!set->member())
    throw InvalidArgument(op() + ": rank " + std::to_string(topology_.rank) + " is not in " +
                          describe_process_set(set->id, set->ranks) + "; only its ranks may submit to it");
  return set->ranks;
}

void Runtime::check_process_set(int process_set_id, const std::function<std::string()>& op, std::vector<int>* ranks) {
  std::lock_guard<std::mutex> lock(process_sets_.mutex());
  const std::vector<int>& members = check_member(process_set_id, op);
  if (ranks != nullptr) *ranks = members;
}

}  // namespace hvd::detail
