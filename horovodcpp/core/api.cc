// The public functions of horovod.h: argument checks on the caller's thread (so bad input fails
// before anything is sent), then an enqueue on the one Runtime. Each tensor is checked and its
// entry filled as its collective's traits say (core/submission.h); what is particular to one
// collective (a broadcast's root in its set, an alltoall's splits) is checked here.
// The runtime's lifecycle and the local queries are lifecycle.cc's.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "core/process_set_access.h"
#include "core/runtime.h"
#include "core/submission.h"
#include "horovodcpp/horovod.h"

namespace hvd {
namespace {

void check_name(const std::string& op, const std::string& name) {
  if (name.rfind("__hvd_", 0) == 0)
    throw InvalidArgument(op + ": tensor name '" + name + "' is reserved (names starting with __hvd_ are internal)");
}

// What the caller passed for one tensor (see detail::checked_entry).
detail::Submitted with_output(TensorPtr input, TensorPtr output, ReadyEventPtr ready) {
  detail::Submitted s;
  s.input = std::move(input);
  s.output = std::move(output);
  s.ready = std::move(ready);
  return s;
}

detail::Submitted allocating(TensorPtr input, OutputAllocator allocate_output, ReadyEventPtr ready) {
  detail::Submitted s;
  s.input = std::move(input);
  s.allocate_output = std::move(allocate_output);
  s.ready = std::move(ready);
  return s;
}

Handle enqueue_one(detail::Runtime& rt, detail::TensorTableEntry e, int process_set_id) {
  std::vector<detail::Request> requests;  // not {request}: a braced list would copy it
  requests.push_back(detail::request_for(e));
  std::vector<detail::TensorTableEntry> entries;
  entries.push_back(std::move(e));
  return Handle(rt.enqueue(std::move(entries), std::move(requests), process_set_id));
}

// One handle for a group's entries, enqueued atomically; the coordinator releases the members
// together once every rank has submitted all of them.
Handle enqueue_group(detail::Runtime& rt, const std::string& group, std::vector<detail::TensorTableEntry> entries,
                     int process_set_id) {
  std::vector<detail::Request> requests;
  for (const auto& e : entries) {
    detail::Request r = detail::request_for(e);
    r.group = group;
    r.group_size = static_cast<int>(entries.size());
    requests.push_back(std::move(r));
  }
  return Handle(rt.enqueue(std::move(entries), std::move(requests), process_set_id));
}

void check_group_counts(const char* what, const std::string& group, std::size_t inputs, std::size_t ready) {
  if (inputs == 0) throw InvalidArgument(std::string(what) + " '" + group + "': no tensors given");
  if (ready != 0 && ready != inputs)
    throw InvalidArgument(std::string(what) + " '" + group + "': " + std::to_string(ready) + " ready events for " +
                std::to_string(inputs) + " tensors");
}

// The set an operation on `name` runs in (see detail::resolve_process_set); `ranks` its members.
int set_for(detail::Runtime& rt, const ProcessSet& set, const char* op, const std::string& name,
            std::vector<int>* ranks = nullptr) {
  return detail::resolve_process_set(rt, set, [&] { return op + (" of '" + name + "'"); }, ranks);
}

// Generated names count per set, so ranks that also work in other sets still agree on them.
std::string name_or_generated(detail::Runtime& rt, const std::string& name, const char* prefix,
                              const ProcessSet& set) {
  check_name(prefix, name);
  if (!name.empty()) return name;
  return rt.generate_name(set.id() > 0 ? std::string(prefix) + ".set" + std::to_string(set.id()) : prefix);
}

// Note [A collective one rank cannot run fails on every rank]
// A rank that finds it cannot run a collective its peers run (bad arguments here only, such as
// alltoall splits that do not add up; a front end's round that failed) must not simply stay
// away: its peers would wait for it for good. It sends a request carrying the reason instead
// (Request::error, hvd::withdraw). That request counts as its submission: once every rank has
// submitted or withdrawn the name, the coordinator answers with an Error naming the rank and the
// reason, and every rank's handle for it fails. The rank's own caller gets the error at once.

// A stand-in request for `name`, for withdraw_requests.
detail::Request named(detail::RequestType type, const std::string& name, const std::string& group = {},
                      int group_size = 0) {
  detail::Request r;
  r.type = type;
  r.name = name;
  r.group = group;
  r.group_size = group_size;
  return r;
}

// Enqueues `requests`, each carrying `reason`, under one handle without tensors. Names already in
// flight on this rank are left alone (their own request stands).
Handle withdraw_requests(detail::Runtime& rt, int set, std::vector<detail::Request> requests, const std::string& reason) {
  std::vector<detail::TensorTableEntry> entries;
  for (auto& r : requests) {
    r.error = reason.empty() ? std::string("no reason given") : reason;
    detail::TensorTableEntry e;  // no tensor: the request alone stands for this rank
    e.name = r.name;
    e.type = r.type;
    entries.push_back(std::move(e));
  }
  return Handle(rt.enqueue(std::move(entries), std::move(requests), set));
}

// Runs this rank's argument checks of a collective; when one throws, its names (the requests
// `withdrawn()` makes, only then) are withdrawn before the error reaches the caller. See
// Note [A collective one rank cannot run fails on every rank].
template <class Withdrawn, class Checks>
void check_or_withdraw(detail::Runtime& rt, int set, Withdrawn&& withdrawn, Checks&& checks) {
  try {
    checks();
  } catch (const Error& e) {
    try {
      withdraw_requests(rt, set, withdrawn(), e.what());
    } catch (const Error&) {
      // In flight here already, or the runtime stopped: nothing more to tell the peers.
    }
    throw;
  }
}

// The one name of a collective that is not grouped, for check_or_withdraw.
std::vector<detail::Request> alone(detail::RequestType type, const std::string& name) {
  std::vector<detail::Request> out;
  out.push_back(named(type, name));
  return out;
}

std::vector<detail::Request> group_members(detail::RequestType type, const std::string& group, std::size_t n) {
  std::vector<detail::Request> out;
  for (std::size_t i = 0; i < n; ++i)
    out.push_back(named(type, group + "." + std::to_string(i), group, static_cast<int>(n)));
  return out;
}

}  // namespace

Handle allreduce_async(TensorPtr input, TensorPtr output, const AllreduceOptions& options, ReadyEventPtr ready) {
  auto& rt = detail::running_runtime("hvd::allreduce");
  const std::string name = name_or_generated(rt, options.name, "allreduce", options.process_set);
  const int set = set_for(rt, options.process_set, "allreduce", name);
  auto submitted = with_output(std::move(input), std::move(output), std::move(ready));
  submitted.reduction = detail::reduction_of(options);
  detail::TensorTableEntry e;
  check_or_withdraw(rt, set, [&] { return alone(detail::RequestType::Allreduce, name); }, [&] {
    e = detail::checked_entry(detail::RequestType::Allreduce, "allreduce", name, std::move(submitted));
  });
  return enqueue_one(rt, std::move(e), set);
}

Handle grouped_allreduce_async(std::vector<TensorPtr> inputs, std::vector<TensorPtr> outputs,
                               const AllreduceOptions& options, std::vector<ReadyEventPtr> ready) {
  auto& rt = detail::running_runtime("hvd::grouped_allreduce");
  const std::string group = name_or_generated(rt, options.name, "grouped_allreduce", options.process_set);
  const int set = set_for(rt, options.process_set, "grouped_allreduce", group);
  std::vector<detail::TensorTableEntry> entries;
  auto members = [&] { return group_members(detail::RequestType::Allreduce, group, inputs.size()); };
  check_or_withdraw(rt, set, members, [&] {
    check_group_counts("grouped_allreduce", group, inputs.size(), ready.size());
    if (outputs.size() != inputs.size())
      throw InvalidArgument("grouped_allreduce '" + group + "': " + std::to_string(inputs.size()) + " inputs but " +
                  std::to_string(outputs.size()) + " outputs");
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      auto submitted = with_output(inputs[i], outputs[i], ready.empty() ? nullptr : ready[i]);
      submitted.reduction = detail::reduction_of(options);
      entries.push_back(detail::checked_entry(detail::RequestType::Allreduce, "grouped_allreduce",
                                              group + "." + std::to_string(i), std::move(submitted)));
    }
  });
  return enqueue_group(rt, group, std::move(entries), set);
}

Handle grouped_allgather_async(std::vector<TensorPtr> inputs, OutputAllocator allocate_output,
                               const AllgatherOptions& options, std::vector<ReadyEventPtr> ready) {
  auto& rt = detail::running_runtime("hvd::grouped_allgather");
  const std::string group = name_or_generated(rt, options.name, "grouped_allgather", options.process_set);
  const int set = set_for(rt, options.process_set, "grouped_allgather", group);
  std::vector<detail::TensorTableEntry> entries;
  auto members = [&] { return group_members(detail::RequestType::Allgather, group, inputs.size()); };
  check_or_withdraw(rt, set, members, [&] {
    check_group_counts("grouped_allgather", group, inputs.size(), ready.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      entries.push_back(detail::checked_entry(detail::RequestType::Allgather, "grouped_allgather",
                                              group + "." + std::to_string(i),
                                              allocating(inputs[i], allocate_output, ready.empty() ? nullptr : ready[i])));
    }
  });
  return enqueue_group(rt, group, std::move(entries), set);
}

Handle grouped_reducescatter_async(std::vector<TensorPtr> inputs, OutputAllocator allocate_output,
                                   const ReducescatterOptions& options, std::vector<ReadyEventPtr> ready) {
  auto& rt = detail::running_runtime("hvd::grouped_reducescatter");
  const std::string group = name_or_generated(rt, options.name, "grouped_reducescatter", options.process_set);
  const int set = set_for(rt, options.process_set, "grouped_reducescatter", group);
  std::vector<detail::TensorTableEntry> entries;
  auto members = [&] { return group_members(detail::RequestType::Reducescatter, group, inputs.size()); };
  check_or_withdraw(rt, set, members, [&] {
    check_group_counts("grouped_reducescatter", group, inputs.size(), ready.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      auto submitted = allocating(inputs[i], allocate_output, ready.empty() ? nullptr : ready[i]);
      submitted.reduction = detail::reduction_of(options);
      entries.push_back(detail::checked_entry(detail::RequestType::Reducescatter, "grouped_reducescatter",
                                              group + "." + std::to_string(i), std::move(submitted)));
    }
  });
  return enqueue_group(rt, group, std::move(entries), set);
}

Handle allgather_async(TensorPtr input, OutputAllocator allocate_output, const AllgatherOptions& options,
                       ReadyEventPtr ready) {
  auto& rt = detail::running_runtime("hvd::allgather");
  const std::string name = name_or_generated(rt, options.name, "allgather", options.process_set);
  const int set = set_for(rt, options.process_set, "allgather", name);
  detail::TensorTableEntry e;
  check_or_withdraw(rt, set, [&] { return alone(detail::RequestType::Allgather, name); }, [&] {
    e = detail::checked_entry(detail::RequestType::Allgather, "allgather", name,
                              allocating(std::move(input), std::move(allocate_output), std::move(ready)));
  });
  return enqueue_one(rt, std::move(e), set);
}

Handle broadcast_async(TensorPtr input, TensorPtr output, const BroadcastOptions& options, ReadyEventPtr ready) {
  auto& rt = detail::running_runtime("hvd::broadcast");
  const std::string name = name_or_generated(rt, options.name, "broadcast", options.process_set);
  std::vector<int> members;
  const int set = set_for(rt, options.process_set, "broadcast", name, &members);
  // As in Horovod, the root is a global rank, and it must be in the set; the collective itself
  // runs on the set's communicator, where the root is its index among the members.
  const auto root_at = std::find(members.begin(), members.end(), options.root);
  detail::TensorTableEntry e;
  check_or_withdraw(rt, set, [&] { return alone(detail::RequestType::Broadcast, name); }, [&] {
    auto submitted = with_output(std::move(input), std::move(output), std::move(ready));
    e = detail::checked_entry(detail::RequestType::Broadcast, "broadcast", name, std::move(submitted));
    if (root_at == members.end()) {
      if (set == 0)
        throw InvalidArgument("broadcast of '" + name + "': root rank " + std::to_string(options.root) + " is out of range [0, " +
                    std::to_string(members.size()) + ")");
      throw InvalidArgument("broadcast of '" + name + "': root rank " + std::to_string(options.root) + " is not in " +
                  options.process_set.describe());
    }
  });
  e.root = static_cast<int>(root_at - members.begin());
  return enqueue_one(rt, std::move(e), set);
}

Handle alltoall_async(TensorPtr input, OutputAllocator allocate_output, const AlltoallOptions& options,
                      ReadyEventPtr ready) {
  auto& rt = detail::running_runtime("hvd::alltoall");
  const std::string name = name_or_generated(rt, options.name, "alltoall", options.process_set);
  std::vector<int> members;
  const int set = set_for(rt, options.process_set, "alltoall", name, &members);
  std::vector<std::int64_t> splits = options.splits;
  detail::TensorTableEntry e;
  check_or_withdraw(rt, set, [&] { return alone(detail::RequestType::Alltoall, name); }, [&] {
    e = detail::checked_entry(detail::RequestType::Alltoall, "alltoall", name,
                              allocating(std::move(input), std::move(allocate_output), std::move(ready)));
    const int size = static_cast<int>(members.size());
    const std::int64_t rows = e.input->shape().front();
    if (splits.empty()) {
      if (rows % size != 0)
        throw InvalidArgument("alltoall of '" + name + "': first dimension " + std::to_string(rows) +
                    " is not divisible by the " + std::to_string(size) + " ranks; pass splits");
      splits.assign(size, rows / size);
    }
    if (static_cast<int>(splits.size()) != size)
      throw InvalidArgument("alltoall of '" + name + "': " + std::to_string(splits.size()) + " splits for " +
                  std::to_string(size) + " ranks");
    std::int64_t total = 0;
    for (auto s : splits) {
      if (s < 0) throw InvalidArgument("alltoall of '" + name + "': negative split " + std::to_string(s));
      total += s;
    }
    if (total != rows)
      throw InvalidArgument("alltoall of '" + name + "': splits sum to " + std::to_string(total) +
                  " but the first dimension is " + std::to_string(rows));
  });
  e.splits = std::move(splits);
  return enqueue_one(rt, std::move(e), set);
}

Handle reducescatter_async(TensorPtr input, OutputAllocator allocate_output, const ReducescatterOptions& options,
                           ReadyEventPtr ready) {
  auto& rt = detail::running_runtime("hvd::reducescatter");
  const std::string name = name_or_generated(rt, options.name, "reducescatter", options.process_set);
  const int set = set_for(rt, options.process_set, "reducescatter", name);
  auto submitted = allocating(std::move(input), std::move(allocate_output), std::move(ready));
  submitted.reduction = detail::reduction_of(options);
  detail::TensorTableEntry e;
  check_or_withdraw(rt, set, [&] { return alone(detail::RequestType::Reducescatter, name); }, [&] {
    e = detail::checked_entry(detail::RequestType::Reducescatter, "reducescatter", name, std::move(submitted));
  });
  return enqueue_one(rt, std::move(e), set);
}

Handle withdraw(const std::string& name, const std::string& reason, const ProcessSet& process_set) {
  auto& rt = detail::running_runtime("hvd::withdraw");
  if (name.empty()) throw InvalidArgument("hvd::withdraw: the collective's name is empty");
  check_name("hvd::withdraw", name);
  const int set = set_for(rt, process_set, "hvd::withdraw", name);
  return withdraw_requests(rt, set, {named(detail::RequestType::Allreduce, name)}, reason);
}

void barrier(const ProcessSet& process_set) {
  auto& rt = detail::running_runtime("hvd::barrier()");
  const int set = detail::resolve_process_set(rt, process_set, [] { return std::string("hvd::barrier()"); }, nullptr);
  // Barrier names count per set, so ranks that wait in different sets still agree on them.
  auto e = detail::checked_entry(detail::RequestType::Barrier, "hvd::barrier()",
                                 rt.generate_name(std::string(detail::kBarrierTensorPrefix) +
                                                  (set == 0 ? "" : ".set" + std::to_string(set))),
                                 {});
  enqueue_one(rt, std::move(e), set).wait();
}

int join(const ProcessSet& process_set) {
  auto& rt = detail::running_runtime("hvd::join()");
  const int set = detail::resolve_process_set(rt, process_set, [] { return std::string("hvd::join()"); }, nullptr);
  auto e = detail::checked_entry(detail::RequestType::Join, "hvd::join()", detail::kJoinTensorName, {});
  detail::Request r = detail::request_for(e);
  std::vector<detail::TensorTableEntry> entries;
  entries.push_back(std::move(e));
  auto state = rt.enqueue(std::move(entries), {std::move(r)}, set);
  Handle(state).wait();
  return state->join_result;
}

}  // namespace hvd
