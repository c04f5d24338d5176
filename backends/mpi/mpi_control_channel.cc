#include "backends/mpi/mpi_control_channel.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "backends/mpi/mpi_types.h"
#include "core/blocked_callers.h"

namespace hvd::detail {
namespace {

void check(int code, const char* call) {
  if (code != MPI_SUCCESS) throw std::runtime_error(mpi_error_message(call, code));
}

// How long a wait inside a cycle polls while a user thread of this process is blocked on a
// result (BlockedCallers): that thread's core is idle, and each sleep would delay the result.
// Ranks in a cycle reach each round within tens of microseconds unless one was descheduled;
// past this the wait sleeps as usual. Measured at np=2 on 2 cores (latency_benchmark): a
// synchronous 4-byte allreduce took 33 us, a broadcast 33-36 us, a barrier 43 us, against
// 73-126, 78-81 and 68-74 us with the sleeping waits alone.
constexpr auto kPollWhileBlocked = std::chrono::milliseconds(2);

// Polls until the request completes (true), or no user thread is blocked any more, or
// kPollWhileBlocked has passed (false).
bool poll_while_callers_blocked(MPI_Request* request) {
  const auto until = std::chrono::steady_clock::now() + kPollWhileBlocked;
  int done = 0;
  do {
    check(MPI_Test(request, &done, MPI_STATUS_IGNORE), "MPI_Test");
  } while (!done && BlockedCallers::any() && std::chrono::steady_clock::now() < until);
  return done != 0;
}

}  // namespace

// Polled this long before the first sleep. Ranks reach a negotiation round within microseconds
// of one another when they are in step, and a sleep costs far more than that (10-60 us of timer
// and wake-up latency): measured at np=2 on 2 cores, a synchronous 4-byte allreduce took 72 us
// with 10 us of polling and 28 us with 50 us. But in training the ranks reach a round
// milliseconds apart, and polling then only takes the core from the computation; so a wait polls
// only when the previous one was short.
constexpr auto kPoll = std::chrono::microseconds(50);

void wait_without_spinning(MPI_Request* request, bool poll_first) {
  using Clock = std::chrono::steady_clock;
  int done = 0;
  check(MPI_Test(request, &done, MPI_STATUS_IGNORE), "MPI_Test");
  const auto poll_until = Clock::now() + (poll_first ? kPoll : std::chrono::microseconds(0));
  while (!done && Clock::now() < poll_until) check(MPI_Test(request, &done, MPI_STATUS_IGNORE), "MPI_Test");
  // Then sleeps that double up to 500 us keep a waiting rank off the cores.
  auto pause = std::chrono::microseconds(20);
  while (!done) {
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(500));
    check(MPI_Test(request, &done, MPI_STATUS_IGNORE), "MPI_Test");
  }
}

std::atomic<bool> MpiControlChannel::oversubscribed_{false};

void MpiControlChannel::set_oversubscribed(bool oversubscribed) { oversubscribed_ = oversubscribed; }

void MpiControlChannel::wait(MPI_Request* request) {
  const bool may_poll = !oversubscribed_.load(std::memory_order_relaxed);
  if (may_poll && BlockedCallers::any() && poll_while_callers_blocked(request)) {
    poll_next_wait_ = true;
    return;
  }
  // A wait that sleeps takes at least one sleep's overshoot, short or not: so after long waits
  // every eighth one polls again, to find out whether the ranks are back in step.
  const bool poll = may_poll && (poll_next_wait_ || ++sleeping_waits_ % 8 == 0);
  const auto begin = std::chrono::steady_clock::now();
  wait_without_spinning(request, poll);
  poll_next_wait_ = std::chrono::steady_clock::now() - begin < 2 * kPoll;
}

MpiControlChannel::MpiControlChannel(MPI_Comm comm) : comm_(comm) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

std::vector<std::vector<std::uint8_t>> MpiControlChannel::gather(const std::vector<std::uint8_t>& mine) {
  int my_size = static_cast<int>(mine.size());
  std::vector<int> sizes(rank_ == 0 ? size_ : 0);
  MPI_Request request;
  check(MPI_Igather(&my_size, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, comm_, &request), "MPI_Igather");
  wait(&request);
  std::vector<int> displacements(sizes.size(), 0);
  if (rank_ == 0) std::exclusive_scan(sizes.begin(), sizes.end(), displacements.begin(), 0);
  std::vector<std::uint8_t> all(rank_ == 0 ? std::accumulate(sizes.begin(), sizes.end(), 0) : 0);
  check(MPI_Igatherv(mine.data(), my_size, MPI_BYTE, all.data(), sizes.data(), displacements.data(), MPI_BYTE, 0,
                     comm_, &request),
        "MPI_Igatherv");
  wait(&request);
  std::vector<std::vector<std::uint8_t>> out;
  for (std::size_t r = 0; r < sizes.size(); ++r)
    out.emplace_back(all.begin() + displacements[r], all.begin() + displacements[r] + sizes[r]);
  return out;
}

std::vector<std::uint8_t> MpiControlChannel::broadcast(const std::vector<std::uint8_t>& from_coordinator) {
  int length = static_cast<int>(from_coordinator.size());
  MPI_Request request;
  check(MPI_Ibcast(&length, 1, MPI_INT, 0, comm_, &request), "MPI_Ibcast");
  wait(&request);
  std::vector<std::uint8_t> bytes = rank_ == 0 ? from_coordinator : std::vector<std::uint8_t>(length);
  check(MPI_Ibcast(bytes.data(), length, MPI_BYTE, 0, comm_, &request), "MPI_Ibcast");
  wait(&request);
  return bytes;
}

void MpiControlChannel::bitwise_and(std::vector<std::uint64_t>& bits) {
  MPI_Request request;
  check(MPI_Iallreduce(MPI_IN_PLACE, bits.data(), static_cast<int>(bits.size()), MPI_UINT64_T, MPI_BAND, comm_,
                       &request),
        "MPI_Iallreduce");
  wait(&request);
}

namespace {
constexpr int kWakeTag = 7001;   // rank -> rank 0: "start cycle N" (N in the payload)
constexpr int kStartTag = 7002;  // rank 0 -> every rank: cycle N starts

// How long a waiting rank sleeps between looks for another rank's cycle start. Local work never
// waits for this: the wait for it wakes at once. Each look wakes the background thread on a core
// that training is using: measured at np=2 (resnet20, ~140 ms steps, 2 cores), a look cost the
// rank 30-50 us of CPU. Looking at the MayBeNeeded ramp below all through a step, as every rank
// did before OwnWorkFirst, took 2.5-4.4% of a core and preempted the training thread 430-460
// times a second (two launches); with OwnWorkFirst, 1.7-2.4% and 150-175 times.
//
// - PeersDue: the others' request is due within milliseconds (this rank finished its backward
//   pass first), and at the idle pace it would be noticed 1-2 ms late. So the rank looks every
//   100 us for the first 200 ms of such a wait, on a core that has nothing else to do then.
//   Measured at np=2 (resnet20, ~90 ms steps, timeline medians of 4 launches each): from the
//   last rank's last gradient to the reduced values took 2.1-2.4 ms, against 2.4-4.0 ms at the
//   idle pace.
// - MayBeNeeded: short right after a cycle (the members of a set this rank is not in submit
//   close together), longer the longer nothing happens.
// - OwnWorkFirst: a cycle another rank starts can complete nothing before this rank submits, and
//   its submission wakes it, so only the rare reasons are looked for, at the longest interval.
std::chrono::microseconds poll_interval(std::chrono::steady_clock::duration waited, CycleExpectation expecting) {
  using std::chrono::microseconds;
  using std::chrono::milliseconds;
  constexpr microseconds kLongest(8000);
  if (expecting == CycleExpectation::OwnWorkFirst) return kLongest;
  microseconds cap = kLongest;
  if (expecting == CycleExpectation::PeersDue && waited < milliseconds(200))
    cap = microseconds(100);
  else if (waited < milliseconds(20))
    cap = microseconds(1000);
  else if (waited < milliseconds(200))
    cap = microseconds(2000);
  else if (waited < milliseconds(1000))
    cap = microseconds(4000);
  const auto half = std::chrono::duration_cast<microseconds>(waited) / 2;
  return std::clamp(half, microseconds(20), cap);
}
}  // namespace

bool MpiControlChannel::asked_by_another(std::uint64_t cycle) {
  while (true) {
    if (wake_request_ == MPI_REQUEST_NULL)
      check(MPI_Irecv(&wake_buffer_, 1, MPI_UINT64_T, MPI_ANY_SOURCE, kWakeTag, comm_, &wake_request_), "MPI_Irecv");
    int arrived = 0;
    check(MPI_Test(&wake_request_, &arrived, MPI_STATUS_IGNORE), "MPI_Test");  // resets it when arrived
    if (!arrived) return false;
    if (wake_buffer_ >= cycle) return true;
    // Stale: asked for a cycle that rank 0 had already started for its own reasons.
  }
}

void MpiControlChannel::wait_for_cycle_start(const CycleWanted& wants_cycle, const Expectation& expecting) {
  using Clock = std::chrono::steady_clock;
  const bool oversubscribed = oversubscribed_.load(std::memory_order_relaxed);
  // The next look's interval, from what this rank expects now and how long it has expected it.
  auto since = Clock::now();
  std::optional<CycleExpectation> current;
  auto next_interval = [&] {
    CycleExpectation now_expecting = expecting();
    // With more ranks than cores, each look would take time from a rank that is still computing.
    if (now_expecting == CycleExpectation::PeersDue && oversubscribed) now_expecting = CycleExpectation::MayBeNeeded;
    if (current != now_expecting) {
      current = now_expecting;
      since = Clock::now();
    }
    return poll_interval(Clock::now() - since, now_expecting);
  };
  std::uint64_t cycle = cycles_started_++;
  if (rank_ == 0) {
    while (!wants_cycle(next_interval()) && !asked_by_another(cycle)) {
    }
    for (int r = 1; r < size_; ++r) check(MPI_Send(&cycle, 1, MPI_UINT64_T, r, kStartTag, comm_), "MPI_Send");
    return;
  }
  std::uint64_t started = 0;
  MPI_Request start;
  check(MPI_Irecv(&started, 1, MPI_UINT64_T, 0, kStartTag, comm_, &start), "MPI_Irecv");
  while (true) {
    int arrived = 0;
    check(MPI_Test(&start, &arrived, MPI_STATUS_IGNORE), "MPI_Test");
    if (arrived) break;
    if (wants_cycle(next_interval())) {
      check(MPI_Send(&cycle, 1, MPI_UINT64_T, 0, kWakeTag, comm_), "MPI_Send");
      wait_for_answer(&start, oversubscribed);
      break;
    }
  }
  if (started != cycle)
    throw std::runtime_error("control channel out of step: rank 0 started cycle " + std::to_string(started) +
                             " while this rank waited for cycle " + std::to_string(cycle));
}

// Rank 0 answers a request within its poll interval, or, when it expects its own work first, once
// that work arrives. While a user thread waits for the result, this rank is ahead of the others
// as in PeersDue, and looking often pays, on a core that has nothing else to do; otherwise
// (gradients submitted during backward, more ranks than cores) the usual sleeping wait.
void MpiControlChannel::wait_for_answer(MPI_Request* start, bool oversubscribed) {
  using Clock = std::chrono::steady_clock;
  if (oversubscribed || !BlockedCallers::any()) return wait(start);
  if (poll_while_callers_blocked(start)) return;
  const auto asked = Clock::now();
  int arrived = 0;
  check(MPI_Test(start, &arrived, MPI_STATUS_IGNORE), "MPI_Test");
  while (!arrived) {
    std::this_thread::sleep_for(poll_interval(Clock::now() - asked, CycleExpectation::PeersDue));
    check(MPI_Test(start, &arrived, MPI_STATUS_IGNORE), "MPI_Test");
  }
}

void MpiControlChannel::close() {
  if (wake_request_ == MPI_REQUEST_NULL) return;
  MPI_Cancel(&wake_request_);
  MPI_Wait(&wake_request_, MPI_STATUS_IGNORE);
}

void MpiControlChannel::bitwise_or(std::vector<std::uint64_t>& bits) {
  MPI_Request request;
  check(MPI_Iallreduce(MPI_IN_PLACE, bits.data(), static_cast<int>(bits.size()), MPI_UINT64_T, MPI_BOR, comm_,
                       &request),
        "MPI_Iallreduce");
  wait(&request);
}

}  // namespace hvd::detail
