#include "core/controller.h"

#include <algorithm>
#include <sstream>

#include "core/codec.h"
#include "core/collective_traits.h"
#include "core/fusion.h"
#include "core/logging.h"
#include "timeline/timeline.h"

namespace hvd::detail {
namespace {

// Flags travel inverted in word 0 of the AND, so that the AND computes their OR.
constexpr std::uint64_t kFlagUncached = 1;
constexpr std::uint64_t kFlagShutdown = 2;
constexpr std::uint64_t kFlagJoined = 4;
constexpr std::uint64_t kFlagCoordinatorDue = 8;
constexpr std::uint64_t kFlagParameters = 16;  // rank 0 has new tuned parameters (step 2b)
constexpr std::uint64_t kFlagFailed = 32;      // some rank brings a failure (step 5)

// Group members must be released together by the coordinator, so none of them is cached.
bool cacheable(const Request& r) { return traits_of(r.type).cacheable && r.group.empty(); }

void set_bit(std::vector<std::uint64_t>& words, std::size_t offset, std::size_t bit) {
  words[offset + bit / 64] |= (std::uint64_t{1} << (bit % 64));
}

bool get_bit(const std::vector<std::uint64_t>& words, std::size_t offset, std::size_t bit) {
  return (words[offset + bit / 64] >> (bit % 64)) & 1;
}

}  // namespace

Controller::Controller(ControlChannel& channel, ControllerOptions options, Timeline* timeline)
    : channel_(channel),
      options_(options),
      timeline_(timeline),
      cache_(options.cache_capacity),
      coordinator_(channel.size(), options.stall, timeline, options.group),
      parameters_{options.fusion_threshold_bytes, options.cycle_time_ms, options.cache_capacity > 0} {}

bool Controller::busy() const {
  return joined_ || !pending_cached_.empty() || !sent_.empty() || !deferred_uncached_.empty() ||
         coordinator_.has_pending();
}

ResponseList Controller::compute_response_list(std::vector<Request> new_requests, bool shutdown,
                                               const std::string& failure) {
  ++stats_.cycles;
  std::vector<Request> uncached = std::move(deferred_uncached_);
  deferred_uncached_.clear();
  std::vector<int> invalid_slots;
  classify(std::move(new_requests), &uncached, &invalid_slots);

  applied_.reset();
  const Agreement agreement = agree(!uncached.empty(), shutdown || !failure.empty(), !failure.empty(), invalid_slots);

  // Responses in an order identical on every rank: cache hits by slot, then the coordinator's.
  std::vector<Response> responses = take_cache_hits(agreement, &uncached);
  if (agreement.new_parameters) {
    apply(receive_parameters());
    applied_ = parameters_;
    for (auto& r : deferred_uncached_) uncached.push_back(std::move(r));  // a cache switch's
    deferred_uncached_.clear();
  }
  const bool any_invalid = std::find(agreement.invalid.begin(), agreement.invalid.end(), true) !=
                           agreement.invalid.end();
  ResponseList result;
  if (agreement.uncached || any_invalid || agreement.joined || agreement.coordinator_due || agreement.new_parameters) {
    ResponseList negotiated = run_slow_path(std::move(uncached), agreement.joined);
    for (auto& r : negotiated.responses) responses.push_back(std::move(r));
    result.shutdown_reason = std::move(negotiated.shutdown_reason);
    if (!result.shutdown_reason.empty()) result.shutdown = true;
  }
  if (agreement.failed) {
    std::string shared = share_failure(failure);
    if (result.shutdown_reason.empty()) result.shutdown_reason = std::move(shared);
    result.shutdown = true;
  }
  result.shutdown = result.shutdown || agreement.shutdown;
  result.shutdown_ranks = agreement.shutdown_ranks;
  result.responses = fuse_responses(std::move(responses), options_.fusion_threshold_bytes);
  return result;
}

void Controller::classify(std::vector<Request> requests, std::vector<Request>* uncached,
                          std::vector<int>* invalid_slots) {
  const auto now = Clock::now();
  for (auto& r : requests) {
    if (r.type == RequestType::Join) joined_ = true;
    auto lookup = parameters_.cache_enabled && cacheable(r) ? cache_.lookup(r) : ResponseCache::Lookup::Miss;
    if (lookup == ResponseCache::Lookup::Hit) {
      const auto since = r.submitted == Clock::time_point{} ? now : std::min(now, r.submitted);
      pending_cached_.push_back({std::move(r), since});
      continue;
    }
    if (lookup == ResponseCache::Lookup::Invalid) invalid_slots->push_back(*cache_.slot_of(r.name));
    uncached->push_back(std::move(r));
  }
  // A cached request waiting too long goes to the coordinator, whose stall inspector can see it.
  if (options_.stall.enabled) {
    const double move_after = std::min(options_.stall.warning_seconds / 2, 5.0);
    for (const auto& p : pending_cached_) {
      if (std::chrono::duration<double>(now - p.since).count() >= move_after)
        invalid_slots->push_back(*cache_.slot_of(p.request.name));
    }
  }
}

Controller::Agreement Controller::agree(bool any_uncached, bool shutdown, bool failed,
                                       const std::vector<int>& invalid_slots) {
  const std::size_t slots = cache_.slot_count();
  const std::size_t words = (slots + 63) / 64;
  const std::size_t rank_words = (static_cast<std::size_t>(channel_.size()) + 63) / 64;
  // [flags | ranks that shut down | invalid slots] travel inverted (their AND is the OR), then
  // the ready bits plainly (their AND says which slots every rank has submitted).
  const std::size_t invalid_at = 1 + rank_words, ready_at = invalid_at + words;
  std::vector<std::uint64_t> bits(ready_at + words, 0);
  std::uint64_t flags = 0;
  if (any_uncached) flags |= kFlagUncached;
  if (shutdown) flags |= kFlagShutdown;
  if (joined_) flags |= kFlagJoined;
  if (channel_.rank() == 0 && coordinator_.stall_check_due()) flags |= kFlagCoordinatorDue;
  if (channel_.rank() == 0 && proposed_) flags |= kFlagParameters;
  if (failed) flags |= kFlagFailed;
  bits[0] = flags;
  if (shutdown) set_bit(bits, 1, static_cast<std::size_t>(channel_.rank()));
  for (int slot : invalid_slots) set_bit(bits, invalid_at, slot);
  for (const auto& p : pending_cached_) set_bit(bits, ready_at, *cache_.slot_of(p.request.name));
  for (std::size_t w = 0; w < ready_at; ++w) bits[w] = ~bits[w];  // AND of inverted = OR

  channel_.bitwise_and(bits);

  Agreement a;
  const std::uint64_t any = ~bits[0];
  a.uncached = any & kFlagUncached;
  a.shutdown = any & kFlagShutdown;
  a.joined = any & kFlagJoined;
  a.coordinator_due = any & kFlagCoordinatorDue;
  a.new_parameters = any & kFlagParameters;
  a.failed = any & kFlagFailed;
  for (int r = 0; r < channel_.size(); ++r)
    if (!get_bit(bits, 1, static_cast<std::size_t>(r))) a.shutdown_ranks.push_back(r);
  a.invalid.resize(slots);
  a.ready.resize(slots);
  for (std::size_t s = 0; s < slots; ++s) {
    a.invalid[s] = !get_bit(bits, invalid_at, s);
    a.ready[s] = get_bit(bits, ready_at, s) && !a.invalid[s];
  }
  return a;
}

std::vector<Response> Controller::take_cache_hits(const Agreement& agreement,
                                                  std::vector<Request>* uncached) {
  // Requests on invalidated slots, or any cached request while a rank has joined, go the slow way.
  std::vector<PendingCached> keep;
  std::vector<std::pair<int, Request>> hits;
  hits.reserve(pending_cached_.size());
  const auto now = Clock::now();
  for (auto& p : pending_cached_) {
    const int slot = *cache_.slot_of(p.request.name);
    if (agreement.invalid[slot] || agreement.joined) {
      p.request.waited_seconds = std::chrono::duration<double>(now - p.since).count();
      uncached->push_back(std::move(p.request));
    } else if (agreement.ready[slot]) {
      hits.emplace_back(slot, std::move(p.request));
    } else {
      keep.push_back(std::move(p));
    }
  }
  pending_cached_ = std::move(keep);
  std::sort(hits.begin(), hits.end(), [](const auto& a, const auto& b) { return a.first < b.first; });

  std::vector<Response> responses;
  responses.reserve(hits.size());
  for (const auto& [slot, request] : hits) {
    responses.push_back(cache_.response_at(slot));
    cache_.touch(slot);
    ++stats_.cache_hits;
    if (timeline_ != nullptr) timeline_->negotiate_end(request.name);
  }
  for (std::size_t s = 0; s < agreement.invalid.size(); ++s) {
    if (!agreement.invalid[s]) continue;
    cache_.erase(static_cast<int>(s));
    ++stats_.cache_invalidations;
  }
  return responses;
}

ResponseList Controller::run_slow_path(std::vector<Request> uncached, bool joined_anywhere) {
  ++stats_.slow_path_cycles;
  RequestList mine;
  for (auto& r : uncached) {
    r.rank = channel_.rank();
    sent_[r.name] = r;
  }
  mine.requests = std::move(uncached);
  std::vector<std::uint8_t> reply;
  if (joined_anywhere) {
    // A join may complete what arrived before it, so the coordinator reads the batch twice.
    const auto gathered = channel_.gather(encode(mine));
    if (channel_.rank() == 0) reply = encode(coordinator_.coordinate(gathered, true));
  } else {
    const bool coordinator = channel_.rank() == 0;
    if (coordinator) coordinator_.start_batch();
    channel_.gather_each(encode(mine), [this](int rank, const std::uint8_t* bytes, std::size_t size) {
      coordinator_.read_list(rank, bytes, size);
    });
    if (coordinator) reply = encode(coordinator_.finish_batch());
  }
  reply = channel_.broadcast(reply);
  ResponseList list;
  try {
    list = decode_response_list(reply.data(), reply.size());
  } catch (const CodecError& e) {
    throw CodecError(std::string("corrupt response list from rank 0 (the coordinator): ") + e.what());
  }

  for (const auto& response : list.responses) {
    if (response.type == ResponseType::Join) joined_ = false;
    for (const auto& name : response.names) {
      auto it = sent_.find(name);
      if (timeline_ != nullptr && it != sent_.end()) timeline_->negotiate_end(name);
      // Every rank puts the same responses in the same order, so cache slots agree. While a
      // rank has joined it lacks the requests, so nobody caches.
      if (parameters_.cache_enabled && !joined_anywhere && it != sent_.end() && cacheable(it->second) &&
          response.type != ResponseType::Error && response.names.size() == 1)
        cache_.put(it->second, response);
      if (it != sent_.end()) sent_.erase(it);
    }
  }
  revalidate_pending();
  return list;
}

void Controller::propose(const TunableParameters& parameters) { proposed_ = parameters; }

TunableParameters Controller::receive_parameters() {
  std::vector<std::uint8_t> bytes;
  if (channel_.rank() == 0) bytes = encode(*proposed_);
  bytes = channel_.broadcast(bytes);
  proposed_.reset();
  try {
    return decode_tunable_parameters(bytes);
  } catch (const CodecError& e) {
    throw CodecError(std::string("tuned parameters from rank 0 (the coordinator): ") + e.what());
  }
}

// Step 5: the failing ranks' reasons, the same text on every rank, after the (global) ranks that
// failed: "rank 1 stopped: R", "ranks 0, 1 stopped; rank 0: R", and when they differ (two sets
// failed in one cycle) each reason once, at its lowest rank, in rank order:
// "ranks 0, 1, 2, 3 stopped; rank 0: R; rank 2: S".
std::string Controller::share_failure(const std::string& failure) {
  const auto gathered = channel_.gather(std::vector<std::uint8_t>(failure.begin(), failure.end()));
  std::vector<std::uint8_t> bytes;
  if (channel_.rank() == 0) {
    const auto& global = options_.group.global_ranks;
    std::vector<int> failed;  // ranks in the group
    for (std::size_t r = 0; r < gathered.size(); ++r)
      if (!gathered[r].empty()) failed.push_back(static_cast<int>(r));
    auto name = [&](int r) { return std::to_string(global.empty() ? r : global.at(r)); };
    std::string reason;
    if (failed.size() == 1) {
      reason = "rank " + name(failed.front()) + " stopped: ";
      reason.append(gathered[failed.front()].begin(), gathered[failed.front()].end());
    } else if (!failed.empty()) {
      reason = "ranks";
      for (std::size_t i = 0; i < failed.size(); ++i) reason += (i ? ", " : " ") + name(failed[i]);
      reason += " stopped";
      std::set<std::vector<std::uint8_t>> seen;
      std::vector<int> firsts;  // the lowest rank of each distinct reason
      for (int r : failed)
        if (seen.insert(gathered[r]).second) firsts.push_back(r);
      constexpr std::size_t kMostReasons = 4;  // a message, not a log
      for (std::size_t i = 0; i < firsts.size() && i < kMostReasons; ++i) {
        reason += "; rank " + name(firsts[i]) + ": ";
        reason.append(gathered[firsts[i]].begin(), gathered[firsts[i]].end());
      }
      if (firsts.size() > kMostReasons)
        reason += "; and " + std::to_string(firsts.size() - kMostReasons) + " other reason(s)";
    }
    bytes.assign(reason.begin(), reason.end());
  }
  bytes = channel_.broadcast(bytes);
  return std::string(bytes.begin(), bytes.end());
}

void Controller::apply(const TunableParameters& parameters) {
  TunableParameters p = parameters;
  p.cache_enabled = p.cache_enabled && options_.cache_capacity > 0;
  if (p.cache_enabled != parameters_.cache_enabled) {
    // Every rank switches in the same cycle, so the caches stay identical (empty); what waited
    // for cache bits is negotiated the slow way.
    const auto now = Clock::now();
    for (auto& pending : pending_cached_) {
      pending.request.waited_seconds = std::chrono::duration<double>(now - pending.since).count();
      deferred_uncached_.push_back(std::move(pending.request));
    }
    pending_cached_.clear();
    cache_.clear();
  }
  parameters_ = p;
  options_.fusion_threshold_bytes = p.fusion_threshold_bytes;
  ++stats_.parameter_changes;
}

// A put may have evicted the slot a pending cached request points at: resend it next cycle.
void Controller::revalidate_pending() {
  std::vector<PendingCached> keep;
  for (auto& p : pending_cached_) {
    if (cache_.lookup(p.request) == ResponseCache::Lookup::Hit)
      keep.push_back(std::move(p));
    else
      deferred_uncached_.push_back(std::move(p.request));
  }
  pending_cached_ = std::move(keep);
}

}  // namespace hvd::detail
