#include "core/executor.h"

#include "core/collective_traits.h"
#include "core/logging.h"
#include "core/stopped.h"

namespace hvd::detail {
namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// This rank's tensor, on the op's end event (the op opens before the entry is taken).
TimelineArgs tensor_args(const TensorTableEntry& e) {
  TimelineArgs args;
  if (e.input) {
    args.emplace_back("dtype", dtype_name(e.input->dtype()));
    args.emplace_back("shape", shape_string(e.input->shape()));
    args.emplace_back("bytes", std::to_string(e.input->size_bytes()));
  }
  return args;
}

// Once the round's response list is known, every tensor's op opens with QUEUE inside: the wait
// behind earlier responses of the round, closed when its own response starts executing.
void open_queued_ops(Timeline& timeline, const ResponseList& list) {
  if (!timeline.enabled()) return;
  for (const auto& response : list.responses) {
    if (response.type == ResponseType::Error || response.type == ResponseType::Join) continue;
    TimelineArgs args;
    if (response.names.size() > 1)
      args.emplace_back("fused_with", std::to_string(response.names.size()) + " tensors, " +
                                          std::to_string(response.total_bytes()) + " bytes, first '" +
                                          response.names.front() + "'");
    for (const auto& name : response.names) {
      timeline.start_op(name, response_type_name(response.type), args);
      timeline.queue_start(name);
    }
  }
}

std::string joined_names(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < 8; ++i) out += (i ? ", '" : "'") + display_name(names[i]) + "'";
  if (names.size() > 8) out += ", ... (" + std::to_string(names.size()) + " tensors)";
  return out;
}

}  // namespace

bool is_process_set_change(const Response& response) {
  if (response.names.size() != 1) return false;
  const std::string& name = response.names.front();
  return starts_with(name, kAddProcessSetPrefix) || starts_with(name, kRemoveProcessSetPrefix);
}

Executor::Executor(const Settings& settings, int rank, TensorQueue& queue, const OpRegistry& registry,
                   Timeline& timeline, ProcessSetTable& sets, World& world,
                   const std::vector<std::unique_ptr<Backend>>& backends, ControllerFactory make_controller,
                   const std::atomic<bool>& abandoned)
    : settings_(settings),
      rank_(rank),
      queue_(queue),
      registry_(registry),
      timeline_(timeline),
      sets_(sets),
      world_(world),
      backends_(backends),
      make_controller_(std::move(make_controller)),
      abandoned_(abandoned) {}

bool Executor::run(const ResponseList& list, ProcessSetState& set, std::string* failure) {
  const Response* current = nullptr;
  std::vector<TensorTableEntry> entries;
  try {
    open_queued_ops(timeline_, list);
    for (const auto& response : list.responses) {
      if (abandoned_.load()) return false;
      current = &response;
      execute(response, set, entries);
    }
  } catch (const std::exception& e) {
    // See Note [An exception in the executor stops every rank]. The handles fail directly: the
    // timeline or finish() may be what threw.
    *failure = current == nullptr ? std::string("preparing the round's responses failed on rank ") +
                                        std::to_string(rank_) + ": " + e.what()
                                  : std::string(response_type_name(current->type)) + " of " +
                                        joined_names(current->names) + " failed on rank " + std::to_string(rank_) +
                                        ": " + e.what();
    // Submissions are refused before the handles wake: the caller's next op, submitted between
    // this and the runtime's stop, would otherwise be taken in and fail as shut down rather
    // than refused as stopped.
    queue_.refuse_adds(stopped_message(*failure));
    for (auto& entry : entries)
      if (entry.handle) entry.handle->fail_all(Status::error(*failure));
    return false;
  }
  return true;
}

void Executor::entries_for(const Response& response, ProcessSetState& set, std::vector<TensorTableEntry>& entries) {
  // One take for the whole response (one lock, not one per name); it keeps the names' order and
  // skips the names this rank has no entry for, which get stand-ins here.
  std::vector<TensorTableEntry> taken = queue_.take(response.names, set.id);
  std::size_t next = 0;
  entries.reserve(entries.size() + response.names.size());
  for (std::size_t i = 0; i < response.names.size(); ++i) {
    if (next < taken.size() && taken[next].name == response.names[i]) {
      entries.push_back(std::move(taken[next++]));
      continue;
    }
    const CollectiveTraits* traits = find_traits(response.type);
    if (traits == nullptr || !traits->has_tensor) continue;
    if (!(set.joined && traits->joinable))
      log_error("internal: no local entry for tensor '" + response.names[i] + "' in a " +
                response_type_name(response.type) + " response; contributing zeros");
    // A joined rank contributes zeros to the joinable collectives it no longer submits.
    TensorTableEntry standin;
    standin.name = response.names[i];
    standin.type = traits->request;
    standin.input = HostTensor::allocate(response.dtype, response.shapes.at(i));
    standin.output = standin.input;
    // The op is chosen by the response's device, as on the ranks that submitted it: a stand-in
    // for a GPU tensor must go to the same backend (NCCL), or the ranks run different collectives.
    standin.device = response.device;
    standin.reduce_op = response.reduce_op;
    standin.prescale_factor = response.prescale_factor;
    standin.postscale_factor = response.postscale_factor;
    entries.push_back(std::move(standin));
  }
}

void Executor::execute(const Response& response, ProcessSetState& set, std::vector<TensorTableEntry>& entries) {
  entries.clear();
  entries_for(response, set, entries);
  if (response.type == ResponseType::Error) {
    for (auto& e : entries) timeline_.start_op(e.name, "ERROR", {{"error", response.error}});
    finish(entries, Status::error(response.error));
    return;
  }
  if (set.id == 0 && is_process_set_change(response)) {
    change_process_sets(response, entries);
    return;
  }
  if (response.type == ResponseType::Join) {
    set.joined = false;
    for (auto& e : entries)
      if (e.handle) e.handle->join_result = response.last_joined_rank;
    finish(entries, Status::ok());
    return;
  }
  std::string why;
  const Communicator& group = *set.communicator;
  CollectiveOp* op =
      registry_.select(response, entries, group, settings_.cpu_operations, settings_.gpu_operations, &why);
  if (op == nullptr) {
    finish(entries, Status::error(std::string(response_type_name(response.type)) + " of " +
                                  joined_names(response.names) + " failed: " + why));
    return;
  }
  for (auto& e : entries) timeline_.queue_end(e.name);
  // An exception goes to run(): see Note [An exception in the executor stops every rank].
  Status status = op->execute(entries, response, group);
  if (status.in_progress_now()) return;  // the op completes them
  if (!status.is_ok())
    status = Status::error(std::string(response_type_name(response.type)) + " of " + joined_names(response.names) +
                           " failed on rank " + std::to_string(rank_) + ": " + status.message());
  finish(entries, status);
}

void Executor::finish(std::vector<TensorTableEntry>& entries, const Status& status) {
  std::vector<HandleState*> completed;
  for (auto& e : entries) {
    if (timeline_.enabled()) {
      TimelineArgs args = tensor_args(e);
      if (!status.is_ok()) args.emplace_back("error", status.message());
      timeline_.end_op(e.name, args);
    }
    if (!e.handle) continue;
    if (!e.received_splits.empty()) e.handle->received_splits = e.received_splits;  // alltoall
    if (e.handle->record_entry(e.handle_index, status, e.output)) completed.push_back(e.handle.get());
  }
  for (HandleState* handle : completed) handle->wake();  // after all: see HandleState::record_entry
}

void Executor::abort_pending(const std::string& reason) {
  std::vector<TensorTableEntry> left = queue_.close(stopped_message(reason));
  for (auto& e : left) {
    std::vector<TensorTableEntry> one;
    one.push_back(std::move(e));
    finish(one, Status::aborted("horovodcpp shut down before " + std::string(request_type_name(one[0].type)) +
                                " of tensor '" + display_name(one[0].name) + "' completed: " + reason));
  }
}

void Executor::change_process_sets(const Response& response, std::vector<TensorTableEntry>& entries) {
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
    if (e.handle) e.handle->new_process_set_id = id;
  finish(entries, status);
}

Status Executor::add_process_set(const Response& response, int* id) {
  const TensorShape& shape = response.shapes.at(0);
  std::vector<int> ranks(shape.begin(), shape.end());
  std::vector<int> sorted;
  // The table is the same on every rank, so every rank reaches the same verdict.
  std::string error = sets_.check_new_ranks(ranks, world_.size(), &sorted);
  if (!error.empty()) return Status::error("hvd::add_process_set: " + error);
  std::lock_guard<std::mutex> lock(sets_.mutex());
  ProcessSetState& set = sets_.open(std::move(sorted), world_, make_controller_);
  *id = set.id;
  log_debug("added " + describe_process_set(set.id, set.ranks));
  return Status::ok();
}

// Refused on every rank when any rank has operations of the set in flight (the ranks learn
// which through one OR over the global set), so no rank drops a set its peers keep.
Status Executor::remove_process_set(const Response& response) {
  const TensorShape& shape = response.shapes.at(0);
  const int id = shape.empty() ? -1 : static_cast<int>(shape.front());
  std::lock_guard<std::mutex> lock(sets_.mutex());
  ProcessSetState* set = sets_.find(id);
  if (id == 0) return Status::error("hvd::remove_process_set: the global process set cannot be removed");
  if (set == nullptr)
    return Status::error("hvd::remove_process_set: process set " + std::to_string(id) +
                         (sets_.was_removed(id) ? " was already removed" : " is not registered"));
  const bool busy = queue_.has_entries(id) || (set->controller && set->controller->busy());
  const std::vector<int> busy_ranks = world_.control().flagged_ranks(busy);
  if (!busy_ranks.empty())
    return Status::error("hvd::remove_process_set: " + describe_process_set(id, set->ranks) +
                         " still has operations in flight on rank" + (busy_ranks.size() > 1 ? "s " : " ") +
                         ranks_string(busy_ranks).substr(1, ranks_string(busy_ranks).size() - 2) +
                         "; wait for them before removing it");
  if (set->communicator != nullptr)
    for (auto& backend : backends_) backend->forget(*set->communicator);
  sets_.remove(id);
  return Status::ok();
}

}  // namespace hvd::detail
