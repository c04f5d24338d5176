#include "core/coordinator.h"

#include <algorithm>

#include "core/codec.h"
#include "core/collective_traits.h"
#include "core/request_checks.h"
#include "timeline/timeline.h"

namespace hvd::detail {
namespace {

// How often the coordinator forces a slow-path cycle so it can inspect stalls while no rank
// has anything new to say.
constexpr auto kStallCheckInterval = std::chrono::seconds(1);

}  // namespace

Coordinator::Coordinator(int size, StallOptions stall, Timeline* timeline, CoordinatorGroup group)
    : size_(size), timeline_(timeline), group_(std::move(group)), stall_inspector_(stall) {}

int Coordinator::global_rank(int rank_in_group) const {
  return group_.global_ranks.empty() ? rank_in_group : group_.global_ranks.at(rank_in_group);
}

int Coordinator::rank_in_group(int global) const {
  if (group_.global_ranks.empty()) return global;
  const auto at = std::find(group_.global_ranks.begin(), group_.global_ranks.end(), global);
  return static_cast<int>(at - group_.global_ranks.begin());
}

bool Coordinator::stall_check_due() const {
  return stall_inspector_.options().enabled && !table_.empty() &&
         Clock::now() - last_stall_check_ >= kStallCheckInterval;
}

ResponseList Coordinator::coordinate(const std::vector<std::vector<std::uint8_t>>& gathered) {
  ResponseList out;
  std::vector<std::string> became_ready;
  std::vector<Request> arrivals;
  for (std::size_t rank = 0; rank < gathered.size(); ++rank) {
    RequestList list;
    try {
      list = decode_request_list(gathered[rank].data(), gathered[rank].size());
    } catch (const CodecError& e) {
      out.shutdown_reason = "corrupt negotiation message from rank " + std::to_string(global_rank(static_cast<int>(rank))) +
                            (group_.label.empty() ? "" : " in " + group_.label) + ": " + e.what();
      return out;
    }
    for (auto& r : list.requests) {
      // The sender is its position in the gather; messages name its global rank.
      r.rank = static_cast<std::int32_t>(global_rank(static_cast<int>(rank)));
      arrivals.push_back(std::move(r));
    }
  }
  // Joins first: a join in this batch may complete tensors that arrived earlier.
  for (auto& r : arrivals)
    if (r.type == RequestType::Join) accept(r, &became_ready);
  for (auto& r : arrivals)
    if (r.type != RequestType::Join) accept(std::move(r), &became_ready);
  if (!joined_ranks_.empty()) {
    for (const auto& name : arrival_order_)
      if (std::find(became_ready.begin(), became_ready.end(), name) == became_ready.end() &&
          is_ready(table_.at(name)))
        became_ready.push_back(name);
  }
  for (const auto& name : became_ready) release(name, &out.responses);

  if (static_cast<int>(joined_ranks_.size()) == size_) {
    Response join;
    join.type = ResponseType::Join;
    join.names = {kJoinTensorName};
    join.last_joined_rank = last_joined_rank_;
    out.responses.push_back(join);
    joined_ranks_.clear();
  }
  out.shutdown_reason = inspect_stalls();
  if (!out.shutdown_reason.empty()) out.shutdown = true;
  return out;
}

void Coordinator::accept(Request request, std::vector<std::string>* became_ready) {
  if (request.type == RequestType::Join) {
    joined_ranks_.insert(request.rank);
    last_joined_rank_ = request.rank;
    return;
  }
  auto [it, inserted] = table_.try_emplace(request.name);
  for (const auto& existing : it->second.requests)
    if (existing.rank == request.rank) return;  // a rank reports a name once; ignore repeats
  if (timeline_ != nullptr && rank_in_group(request.rank) != 0) {
    // The coordinator's negotiation starts when the first rank reports (a no-op if open).
    timeline_->negotiate_start(request.name, request_type_name(request.type));
    timeline_->negotiate_rank_ready(request.name, request.rank);
  }
  const auto submitted = Clock::now() - std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(request.waited_seconds));
  if (inserted) {
    it->second.first_seen = submitted;
    arrival_order_.push_back(request.name);
  } else {
    it->second.first_seen = std::min(it->second.first_seen, submitted);
  }
  it->second.requests.push_back(std::move(request));
  if (is_ready(it->second)) became_ready->push_back(it->first);
}

bool Coordinator::is_ready(const TableEntry& entry) const {
  std::set<int> ranks(joined_ranks_);
  for (const auto& r : entry.requests) ranks.insert(r.rank);
  return static_cast<int>(ranks.size()) == size_;
}

Response Coordinator::build_response(const std::string& name, const TableEntry& entry) const {
  std::vector<int> joined(joined_ranks_.begin(), joined_ranks_.end());
  std::string error = check_requests(entry.requests, size_, joined);
  Response r;
  r.names = {name};
  if (!error.empty()) {
    r.type = ResponseType::Error;
    r.error = group_.label.empty() ? std::move(error) : error + " (in " + group_.label + ")";
    return r;
  }
  const Request& first = entry.requests.front();
  r.type = response_type_for(first.type);
  r.shapes = {first.shape};
  r.dtype = first.dtype;
  r.device = first.device;
  r.reduce_op = first.reduce_op;
  r.prescale_factor = first.prescale_factor;
  r.postscale_factor = first.postscale_factor;
  r.root = first.root;
  if (traits_of(first.type).per_rank_first_dim) {
    r.first_dims.assign(size_, 0);
    for (const auto& req : entry.requests) r.first_dims[rank_in_group(req.rank)] = req.shape.front();
  }
  return r;
}

// Emits the response for a ready name; a grouped tensor waits until its whole group is ready.
void Coordinator::release(const std::string& name, std::vector<Response>* out) {
  if (!table_.count(name)) return;  // failed with the rest of its group earlier in this cycle
  const Request& first = table_.at(name).requests.front();
  if (first.group.empty()) {
    emit(name, build_response(name, table_.at(name)), out);
    return;
  }
  const std::string group = first.group;
  const int group_size = first.group_size;
  auto& members = ready_groups_[group];
  if (std::find(members.begin(), members.end(), name) != members.end()) return;  // already waiting
  members.push_back(name);
  // A rank submits its whole group in one cycle, so every member any rank sent is in the table
  // by now: ranks that disagree on the group's size fail every member instead of waiting.
  std::string size_error = check_group_sizes(group);
  if (!size_error.empty()) {
    ready_groups_.erase(group);
    std::vector<std::string> all;
    for (const auto& n : arrival_order_)
      if (table_.at(n).requests.front().group == group) all.push_back(n);
    for (const auto& n : all) {
      Response error;
      error.type = ResponseType::Error;
      error.names = {n};
      error.error = size_error;
      emit(n, std::move(error), out);
    }
    return;
  }
  if (static_cast<int>(members.size()) < group_size) return;
  std::vector<std::string> names = std::move(members);
  ready_groups_.erase(group);
  for (const auto& n : names) emit(n, build_response(n, table_.at(n)), out);
}

std::string Coordinator::check_group_sizes(const std::string& group) const {
  const Request* reference = nullptr;
  for (const auto& [name, entry] : table_) {
    for (const auto& r : entry.requests) {
      if (r.group != group) continue;
      if (reference == nullptr) reference = &r;
      if (r.group_size == reference->group_size) continue;
      const Request& low = r.rank < reference->rank ? r : *reference;
      const Request& high = r.rank < reference->rank ? *reference : r;
      return std::string("Mismatched group sizes for grouped ") + traits_of(r.type).name + " '" +
             display_name(group) + "': rank " + std::to_string(low.rank) +
             " submitted " + std::to_string(low.group_size) + " tensors, rank " + std::to_string(high.rank) +
             " submitted " + std::to_string(high.group_size);
    }
  }
  return {};
}

void Coordinator::emit(const std::string& name, Response response, std::vector<Response>* out) {
  out->push_back(std::move(response));
  stall_inspector_.forget(name);
  table_.erase(name);
  arrival_order_.erase(std::find(arrival_order_.begin(), arrival_order_.end(), name));
}

std::string Coordinator::inspect_stalls() {
  last_stall_check_ = Clock::now();
  if (!stall_inspector_.options().enabled || table_.empty()) return {};
  std::vector<StalledTensor> pending;
  for (const auto& name : arrival_order_) {
    const TableEntry& entry = table_.at(name);
    std::set<int> present(joined_ranks_);
    for (const auto& r : entry.requests) present.insert(r.rank);
    StalledTensor s;
    s.name = name;
    s.process_set = group_.label;
    for (int rank = 0; rank < size_; ++rank)
      if (!present.count(global_rank(rank))) s.missing_ranks.push_back(global_rank(rank));
    s.waited_seconds = std::chrono::duration<double>(last_stall_check_ - entry.first_seen).count();
    pending.push_back(std::move(s));
  }
  std::string fatal = stall_inspector_.inspect(pending);
  if (!fatal.empty()) stall_error_ = fatal;
  return fatal;
}

}  // namespace hvd::detail
