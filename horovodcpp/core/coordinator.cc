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
    : size_(size), timeline_(timeline), group_(std::move(group)), stall_inspector_(stall), joined_(size, false) {}

int Coordinator::global_rank(int rank_in_group) const {
  return group_.global_ranks.empty() ? rank_in_group : group_.global_ranks.at(rank_in_group);
}

bool Coordinator::stall_check_due() const {
  return stall_inspector_.options().enabled && !table_.empty() &&
         Clock::now() - last_stall_check_ >= kStallCheckInterval;
}

// See Note [The coordinator's work is linear in ranks x tensors].
ResponseList Coordinator::coordinate(const std::vector<std::vector<std::uint8_t>>& gathered, bool joins_possible) {
  if (static_cast<int>(gathered.size()) != size_) {
    ResponseList out;
    out.shutdown_reason = wrong_list_count(gathered.size());
    return out;
  }
  // Joins first: a join in this batch may complete tensors that arrived earlier. Finding them
  // takes a reading of every list of the batch, so it is done only when a rank may have sent one.
  std::vector<int> joins;
  if (joins_possible) {
    const std::string error = find_joins(gathered, &joins);
    if (!error.empty()) {
      ResponseList out;
      out.shutdown_reason = error;
      return out;
    }
  }
  for (int member : joins) join(member);
  start_batch(joins_possible);
  for (int member = 0; member < size_; ++member)
    read_list(member, gathered[member].data(), gathered[member].size());
  return finish_batch();
}

void Coordinator::start_batch(bool joins_read) {
  batch_ = Batch{};
  batch_.now = Clock::now();
  batch_.joins_read = joins_read;
  hints_.clear();
}

void Coordinator::read_list(int member, const std::uint8_t* data, std::size_t size) {
  if (!batch_.error.empty()) return;  // the job ends on the first corrupt list
  if (member != batch_.next_member) {
    batch_.error = "the coordinator" + where() + " received rank " + std::to_string(global_rank(member)) +
                   "'s request list out of order (expected rank " + std::to_string(global_rank(batch_.next_member)) +
                   "'s)";
    return;
  }
  ++batch_.next_member;
  try {
    RequestListReader reader(data, size);
    for (std::size_t position = 0; reader.next(&scratch_); ++position) {
      if (scratch_.type == RequestType::Join) {
        if (!batch_.joins_read) join(member);  // not expected; it still counts
        continue;
      }
      // The sender is its position in the gather; messages name its global rank.
      scratch_.rank = static_cast<std::int32_t>(global_rank(member));
      accept(scratch_, member, position, batch_.now, &batch_.became_ready);
    }
  } catch (const CodecError& e) {
    // The job ends on it; the requests read before it are never answered.
    batch_.error = corrupt_list(member, e);
  }
}

ResponseList Coordinator::finish_batch() {
  ResponseList out;
  if (batch_.error.empty() && batch_.next_member != size_) batch_.error = wrong_list_count(batch_.next_member);
  if (!batch_.error.empty()) {
    out.shutdown_reason = std::move(batch_.error);
    return out;
  }
  std::vector<std::string>& became_ready = batch_.became_ready;
  if (!joined_ranks_.empty()) {
    for (const auto& name : arrival_order_) {
      TableEntry& entry = table_.at(name);
      if (!entry.listed_ready && is_ready(entry)) {
        entry.listed_ready = true;
        became_ready.push_back(name);
      }
    }
  }
  for (const auto& name : became_ready) release(name, &out.responses);

  if (static_cast<int>(joined_ranks_.size()) == size_) {
    Response join;
    join.type = ResponseType::Join;
    join.names = {kJoinTensorName};
    join.last_joined_rank = last_joined_rank_;
    out.responses.push_back(join);
    joined_ranks_.clear();
    joined_.assign(size_, false);
    for (auto& [name, entry] : table_) entry.joined_reporters = 0;
  }
  out.shutdown_reason = inspect_stalls();
  if (!out.shutdown_reason.empty()) out.shutdown = true;
  return out;
}

std::string Coordinator::where() const { return group_.label.empty() ? "" : " in " + group_.label; }

std::string Coordinator::with_set(std::string error) const {
  return group_.label.empty() ? error : error + " (in " + group_.label + ")";
}

std::string Coordinator::wrong_list_count(std::size_t received) const {
  return "the coordinator" + where() + " received " + std::to_string(received) + " request lists for " +
         std::to_string(size_) + " ranks";
}

std::string Coordinator::corrupt_list(int member, const CodecError& e) const {
  return "corrupt negotiation message from rank " + std::to_string(global_rank(member)) + where() + ": " + e.what();
}

// Reads every list (so a corrupt one ends the job before anything of its batch counts) and
// notes the ranks that sent a join, in order. Returns the error, if any.
std::string Coordinator::find_joins(const std::vector<std::vector<std::uint8_t>>& gathered, std::vector<int>* joins) {
  for (int member = 0; member < size_; ++member) {
    try {
      RequestListReader reader(gathered[member].data(), gathered[member].size());
      while (reader.next(&scratch_))
        if (scratch_.type == RequestType::Join) joins->push_back(member);
    } catch (const CodecError& e) {
      return corrupt_list(member, e);
    }
  }
  return {};
}

void Coordinator::join(int member) {
  const int global = global_rank(member);
  last_joined_rank_ = global;
  if (!joined_ranks_.insert(global).second) return;
  joined_[member] = true;
  // Its requests still in the table now count as a joined rank's, once.
  for (auto& [name, entry] : table_)
    if (entry.reported[member]) ++entry.joined_reporters;
}

namespace {

// Whether `r` says what `first` says, apart from what differs between ranks that agree: the
// rank, the device index (each rank has its own GPU), the first dimension of a collective with
// one per rank, and how long it waited.
bool agrees_with(const Request& first, const Request& r) {
  if (r.type != first.type || r.dtype != first.dtype || r.reduce_op != first.reduce_op ||
      r.prescale_factor != first.prescale_factor || r.postscale_factor != first.postscale_factor ||
      r.root != first.root || r.group_size != first.group_size || r.process_set_id != first.process_set_id ||
      (r.device == kCpuDevice) != (first.device == kCpuDevice) || r.shape.size() != first.shape.size() ||
      r.group != first.group)
    return false;
  const std::size_t from = traits_of(first.type).per_rank_first_dim && !first.shape.empty() ? 1 : 0;
  return std::equal(r.shape.begin() + from, r.shape.end(), first.shape.begin() + from);
}

}  // namespace

void Coordinator::accept(const Request& request, int member, std::size_t position, Clock::time_point now,
                         std::vector<std::string>* became_ready) {
  // The ranks of a data-parallel job submit the same names in the same order: the entry of the
  // previous rank's request at this position is usually this one's.
  if (position >= hints_.size()) hints_.resize(position + 1, nullptr);
  TableEntry* hinted = hints_[position];
  bool inserted = false;
  if (hinted == nullptr || hinted->first.name != request.name) {
    auto emplaced = table_.try_emplace(request.name);
    inserted = emplaced.second;
    hinted = hints_[position] = &emplaced.first->second;
  }
  TableEntry& entry = *hinted;
  // The next request of this list most likely names the next position's entry: start loading
  // it now (at thousands of ranks it is often out of the nearest caches by then).
  if (position + 1 < hints_.size() && hints_[position + 1] != nullptr) __builtin_prefetch(hints_[position + 1]);
  if (inserted) {
    entry.first = request;
    entry.reported.assign(size_, false);
    if (traits_of(request.type).per_rank_first_dim) entry.first_dims.assign(size_, 0);
    entry.order = arrival_order_.insert(arrival_order_.end(), request.name);
  } else if (entry.reported[member]) {
    return;  // a rank reports a name once; ignore repeats
  }
  entry.reported[member] = true;
  ++entry.reporters;
  if (joined_[member]) ++entry.joined_reporters;
  if (!entry.first_dims.empty() && !request.shape.empty()) entry.first_dims[member] = request.shape.front();
  if (request.device != entry.first.device && entry.devices.empty()) entry.devices.assign(size_, entry.first.device);
  if (!entry.devices.empty()) entry.devices[member] = request.device;
  if (!inserted && !agrees_with(entry.first, request)) {
    entry.different.push_back(request);
    entry.different_members.push_back(member);
  }
  if (!request.group.empty()) note_group(request);
  if (timeline_ != nullptr && member != 0) {
    // The coordinator's negotiation starts when the first rank reports (a no-op if open).
    timeline_->negotiate_start(request.name, request_type_name(request.type));
    timeline_->negotiate_rank_ready(request.name, request.rank);
  }
  const auto submitted = now - std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(request.waited_seconds));
  entry.first_seen = inserted ? submitted : std::min(entry.first_seen, submitted);
  if (!entry.listed_ready && is_ready(entry)) {
    entry.listed_ready = true;
    became_ready->push_back(entry.first.name);
  }
}

// Ready when every rank has reported, or joined (the ranks that did both count once). A
// collective that does not accept joined ranks is ready to fail as soon as a joined rank lacks
// it: that rank waits in join() until every rank joined, so it would never come, and the ranks
// that did submit it would wait for good (with unnamed tensors, whose generated names differ
// once some ranks skipped a call, they could not even agree on the name to fail).
bool Coordinator::is_ready(const TableEntry& entry) const {
  const int joined = static_cast<int>(joined_ranks_.size());
  if (entry.reporters + joined - entry.joined_reporters == size_) return true;
  return joined > entry.joined_reporters && !traits_of(entry.first.type).joinable;
}

// The lowest rank of those that agree with the first request, as it sent its request, and every
// request that differs: check_requests finds in them what it would find in all of them (the
// agreeing ranks pass or fail alike, so the lowest of them stands for the rest).
std::vector<Request> Coordinator::requests_to_check(const TableEntry& entry) const {
  std::vector<bool> differs(entry.different.empty() ? 0 : size_, false);
  for (int member : entry.different_members) differs[member] = true;
  std::vector<Request> out;
  out.reserve(1 + entry.different.size());
  for (int member = 0; member < size_; ++member) {
    if (!entry.reported[member] || (!differs.empty() && differs[member])) continue;
    Request lowest = entry.first;
    lowest.rank = static_cast<std::int32_t>(global_rank(member));
    if (!entry.devices.empty()) lowest.device = entry.devices[member];
    if (!entry.first_dims.empty() && !lowest.shape.empty()) lowest.shape.front() = entry.first_dims[member];
    out.push_back(std::move(lowest));
    break;
  }
  out.insert(out.end(), entry.different.begin(), entry.different.end());
  return out;
}

Response Coordinator::build_response(const std::string& name, const TableEntry& entry) const {
  std::vector<int> joined(joined_ranks_.begin(), joined_ranks_.end());
  std::string error = check_requests(requests_to_check(entry), size_, joined);
  Response r;
  r.names = {name};
  if (!error.empty()) {
    r.type = ResponseType::Error;
    r.error = with_set(std::move(error));
    return r;
  }
  const Request& first = entry.first;
  r.type = response_type_for(first.type);
  r.shapes = {first.shape};
  r.dtype = first.dtype;
  r.device = first.device;
  r.reduce_op = first.reduce_op;
  r.prescale_factor = first.prescale_factor;
  r.postscale_factor = first.postscale_factor;
  r.root = first.root;
  if (traits_of(first.type).per_rank_first_dim) r.first_dims = entry.first_dims;
  return r;
}

// Emits the response for a ready name; a grouped tensor waits until its whole group is ready.
void Coordinator::release(const std::string& name, std::vector<Response>* out) {
  const auto it = table_.find(name);
  if (it == table_.end()) return;  // failed with the rest of its group earlier in this cycle
  TableEntry& entry = it->second;
  if (entry.first.group.empty()) {
    emit(name, build_response(name, entry), out);
    return;
  }
  if (entry.waiting_for_group) return;
  entry.waiting_for_group = true;
  const std::string group = entry.first.group;
  const int group_size = entry.first.group_size;
  auto& members = ready_groups_[group];
  members.push_back(name);
  // A rank submits its whole group in one cycle, so every member any rank sent is in the table
  // by now: ranks that disagree on the group's size fail every member instead of waiting.
  const std::string size_error = groups_.at(group).size_error;
  if (!size_error.empty()) {
    ready_groups_.erase(group);
    std::vector<std::string> all;
    for (const auto& n : arrival_order_)
      if (table_.at(n).first.group == group) all.push_back(n);
    for (const auto& n : all) {
      Response error;
      error.type = ResponseType::Error;
      error.names = {n};
      error.error = with_set(size_error);
      emit(n, std::move(error), out);
    }
    return;
  }
  if (static_cast<int>(members.size()) < group_size) return;
  std::vector<std::string> names = std::move(members);
  ready_groups_.erase(group);
  for (const auto& n : names) emit(n, build_response(n, table_.at(n)), out);
}

// Compares each request naming a group with the first one that did, as it arrives.
void Coordinator::note_group(const Request& r) {
  GroupState& state = groups_[r.group];
  if (state.requests++ == 0) {
    state.first_rank = r.rank;
    state.first_size = r.group_size;
    return;
  }
  if (!state.size_error.empty() || r.group_size == state.first_size) return;
  const bool first_low = state.first_rank < r.rank;
  const std::int32_t low_rank = first_low ? state.first_rank : r.rank, high_rank = first_low ? r.rank : state.first_rank;
  const std::int32_t low_size = first_low ? state.first_size : r.group_size;
  const std::int32_t high_size = first_low ? r.group_size : state.first_size;
  state.size_error = std::string("Mismatched group sizes for grouped ") + traits_of(r.type).name + " '" +
                     display_name(r.group) + "': rank " + std::to_string(low_rank) + " submitted " +
                     std::to_string(low_size) + " tensors, rank " + std::to_string(high_rank) + " submitted " +
                     std::to_string(high_size);
}

void Coordinator::emit(const std::string& name, Response response, std::vector<Response>* out) {
  out->push_back(std::move(response));
  stall_inspector_.forget(name);
  const auto it = table_.find(name);
  const TableEntry& entry = it->second;
  // Its requests leave their groups' counts: those that agree with the first carry its group.
  auto leave = [this](const std::string& group, int requests) {
    const auto at = groups_.find(group);
    if (at != groups_.end() && (at->second.requests -= requests) <= 0) groups_.erase(at);
  };
  if (!entry.first.group.empty()) leave(entry.first.group, entry.reporters - static_cast<int>(entry.different.size()));
  for (const auto& r : entry.different)
    if (!r.group.empty()) leave(r.group, 1);
  arrival_order_.erase(entry.order);
  table_.erase(it);
}

std::string Coordinator::inspect_stalls() {
  last_stall_check_ = Clock::now();
  const StallOptions& options = stall_inspector_.options();
  if (!options.enabled || table_.empty()) return {};
  // Only a tensor past the warning or the shutdown time can be reported: the others are skipped.
  double report_after = options.warning_seconds;
  if (options.shutdown_seconds > 0) report_after = std::min(report_after, options.shutdown_seconds);
  std::vector<StalledTensor> pending;
  for (const auto& name : arrival_order_) {
    const TableEntry& entry = table_.at(name);
    const double waited = std::chrono::duration<double>(last_stall_check_ - entry.first_seen).count();
    if (waited < report_after) continue;
    StalledTensor s;
    s.name = name;
    s.process_set = group_.label;
    for (int member = 0; member < size_; ++member)
      if (!entry.reported[member] && !joined_[member]) s.missing_ranks.push_back(global_rank(member));
    s.waited_seconds = waited;
    pending.push_back(std::move(s));
  }
  return stall_inspector_.inspect(pending);
}

}  // namespace hvd::detail
