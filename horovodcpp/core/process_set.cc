// hvd::ProcessSet and the functions that register and remove sets (horovod.h).
#include <algorithm>

#include "core/process_set_access.h"
#include "core/process_set_table.h"
#include "core/runtime.h"

namespace hvd {
namespace {

const char* kDynamicHint =
    " needs HOROVOD_DYNAMIC_PROCESS_SETS=1 (hvdrun --dynamic-process-sets) on every rank; without it, pass the "
    "sets to hvd::init(process_sets)";

std::vector<std::int64_t> as_shape(const std::vector<int>& values) {
  return std::vector<std::int64_t>(values.begin(), values.end());
}

// Enqueues a reserved BARRIER in the global set carrying `shape` and waits for it on every rank.
int run_global_change(detail::Runtime& rt, const char* prefix, std::vector<std::int64_t> shape) {
  detail::TensorTableEntry e;
  e.name = rt.generate_name(prefix);
  e.type = detail::RequestType::Barrier;
  detail::Request r;
  r.type = detail::RequestType::Barrier;
  r.name = e.name;
  r.shape = std::move(shape);
  std::vector<detail::TensorTableEntry> entries;
  entries.push_back(std::move(e));
  auto state = rt.enqueue(std::move(entries), {std::move(r)});
  Handle(state).wait();
  return state->new_process_set_id;
}

}  // namespace

ProcessSet::ProcessSet(std::vector<int> ranks) : identity_(std::make_shared<detail::ProcessSetIdentity>()) {
  identity_->ranks = std::move(ranks);
}

int ProcessSet::id() const { return identity_ ? identity_->id.load() : 0; }

std::vector<int> ProcessSet::ranks() const {
  if (!identity_) {
    const int n = detail::initialized_runtime_for("hvd::ProcessSet::ranks()").topology().size;
    std::vector<int> all(n);
    for (int r = 0; r < n; ++r) all[r] = r;
    return all;
  }
  std::vector<int> sorted = identity_->ranks;
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

int ProcessSet::size() const { return static_cast<int>(ranks().size()); }

bool ProcessSet::included() const {
  const int me = detail::initialized_runtime_for("hvd::ProcessSet::included()").topology().rank;
  if (!identity_) return true;
  return std::find(identity_->ranks.begin(), identity_->ranks.end(), me) != identity_->ranks.end();
}

int ProcessSet::rank() const {
  const int me = detail::initialized_runtime_for("hvd::ProcessSet::rank()").topology().rank;
  const std::vector<int> members = ranks();
  const auto at = std::find(members.begin(), members.end(), me);
  if (at == members.end())
    throw Error("hvd::ProcessSet::rank(): rank " + std::to_string(me) + " is not in " + describe());
  return static_cast<int>(at - members.begin());
}

std::string ProcessSet::describe() const {
  if (!identity_) return "the global process set";
  const int id = identity_->id.load();
  if (id < 0)
    return std::string(identity_->removed.load() ? "removed" : "unregistered") + " process set (ranks " +
           detail::ranks_string(identity_->ranks) + ")";
  return detail::describe_process_set(id, ranks());
}

bool operator==(const ProcessSet& a, const ProcessSet& b) {
  if (a.identity_ == b.identity_) return true;
  return a.id() >= 0 && a.id() == b.id();
}

ProcessSet global_process_set() { return ProcessSet(); }

ProcessSet add_process_set(std::vector<int> ranks) { return add_process_set(ProcessSet(std::move(ranks))); }

ProcessSet add_process_set(const ProcessSet& process_set) {
  const std::string op = "hvd::add_process_set";
  auto& rt = detail::running_runtime(op);
  auto identity = detail::ProcessSetAccess::identity(process_set);
  if (!identity) throw InvalidArgument(op + ": the global process set is always registered");
  if (identity->id.load() >= 0) throw InvalidArgument(op + ": " + process_set.describe() + " is already registered");
  if (!rt.dynamic_process_sets()) throw Error(op + std::string(kDynamicHint));
  // Checked here too (the background thread checks again against the table every rank shares),
  // so bad ranks fail at once on the caller's thread.
  std::vector<int> sorted;
  detail::ProcessSetTable scratch;
  const std::string error = scratch.check_new_ranks(identity->ranks, rt.topology().size, &sorted);
  if (!error.empty()) throw InvalidArgument(op + ": " + error);
  identity->id = run_global_change(rt, detail::kAddProcessSetPrefix, as_shape(identity->ranks));
  return process_set;
}

void remove_process_set(const ProcessSet& process_set) {
  const std::string op = "hvd::remove_process_set";
  auto& rt = detail::running_runtime(op);
  auto identity = detail::ProcessSetAccess::identity(process_set);
  if (!identity) throw InvalidArgument(op + ": the global process set cannot be removed");
  if (!rt.dynamic_process_sets()) throw Error(op + std::string(kDynamicHint));
  const int id = identity->id.load();
  if (id < 0) throw InvalidArgument(op + ": " + process_set.describe() + " is not registered");
  run_global_change(rt, detail::kRemoveProcessSetPrefix, {id});
  identity->id = -1;
  identity->removed = true;
}

namespace detail {

int resolve_process_set(Runtime& runtime, const ProcessSet& set, const std::function<std::string()>& op,
                        std::vector<int>* ranks) {
  auto identity = ProcessSetAccess::identity(set);
  if (!identity) {
    if (ranks != nullptr) runtime.check_process_set(0, op, ranks);
    return 0;
  }
  const int id = identity->id.load();
  if (id < 0)
    throw InvalidArgument(op() + ": " + set.describe() + " cannot be used" +
                (identity->removed.load() ? "" : "; register it with hvd::init(process_sets) or hvd::add_process_set()"));
  runtime.check_process_set(id, op, ranks);
  return id;
}

}  // namespace detail
}  // namespace hvd
