#include "backends/mpi/mpi_control_channel.h"

#include <algorithm>
#include <chrono>
#include <numeric>
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

// Polls until the request completes (true), or no user thread is blocked any more, or
// kPollWhileBlocked has passed (false). See Note [Polling while a caller is blocked].
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
// of one another when they are in step, and a sleep costs far more than that (timer and wake-up
// latency): a shorter poll left a synchronous allreduce more than twice as slow
// (docs/benchmarks.md, "Figures behind design choices"). But in training the ranks reach a round
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

MpiControlChannel::MpiControlChannel(MPI_Comm comm, int receive_window)
    : comm_(comm), receive_window_(receive_window) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

// Rank 0: every rank's byte count; other ranks: nothing.
std::vector<int> MpiControlChannel::gather_sizes(int my_size) {
  std::vector<int> sizes(rank_ == 0 ? size_ : 0);
  MPI_Request request;
  check(MPI_Igather(&my_size, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, comm_, &request), "MPI_Igather");
  wait(&request);
  return sizes;
}

std::vector<std::vector<std::uint8_t>> MpiControlChannel::gather(const std::vector<std::uint8_t>& mine) {
  const int my_size = static_cast<int>(mine.size());
  const std::vector<int> sizes = gather_sizes(my_size);
  MPI_Request request;
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

namespace {
constexpr int kListTag = 7003;  // rank -> rank 0: its encoded request list (gather_each)
}  // namespace

// Rank 0 receives the lists in rank order, at most receive_window_ at a time, each into a buffer
// it keeps for the next cycles, and has each read as soon as it is there: the lists of a large
// job (200 requests x 4096 ranks are about 16 MB) are never held at once, and each is read while
// it is still in cache. The other ranks send theirs.
void MpiControlChannel::gather_each(const std::vector<std::uint8_t>& mine, const ListVisitor& visit) {
  const int my_size = static_cast<int>(mine.size());
  const std::vector<int> sizes = gather_sizes(my_size);
  if (rank_ != 0) {
    MPI_Request request;
    check(MPI_Isend(mine.data(), my_size, MPI_BYTE, 0, kListTag, comm_, &request), "MPI_Isend");
    wait(&request);
    return;
  }
  const int window = std::min(size_ - 1, std::max(1, receive_window_));  // 0 when rank 0 is alone
  if (static_cast<int>(list_buffers_.size()) < window) list_buffers_.resize(window);
  std::vector<MPI_Request> receives(window, MPI_REQUEST_NULL);
  auto slot = [window](int r) { return (r - 1) % window; };  // rank r's buffer and request
  auto post = [&](int r) {
    auto& buffer = list_buffers_[slot(r)];
    buffer.resize(sizes[r]);
    check(MPI_Irecv(buffer.data(), sizes[r], MPI_BYTE, r, kListTag, comm_, &receives[slot(r)]), "MPI_Irecv");
  };
  try {
    for (int r = 1; r <= window; ++r) post(r);
    visit(0, mine.data(), mine.size());
    for (int r = 1; r < size_; ++r) {
      MPI_Request* receive = &receives[slot(r)];
      int done = 0;
      check(MPI_Test(receive, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (!done) wait(receive);  // only a real wait tells the pacing whether the ranks are in step
      visit(r, list_buffers_[slot(r)].data(), static_cast<std::size_t>(sizes[r]));
      if (r + window < size_) post(r + window);
    }
  } catch (...) {
    // Nothing may be left writing into the buffers: cancel what is still posted.
    for (auto& receive : receives) {
      if (receive == MPI_REQUEST_NULL) continue;
      MPI_Cancel(&receive);
      MPI_Wait(&receive, MPI_STATUS_IGNORE);
    }
    throw;
  }
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
}  // namespace

bool MpiControlChannel::start_arrived() {
  if (rank_ == 0) {
    while (true) {
      if (wake_request_ == MPI_REQUEST_NULL)
        check(MPI_Irecv(&wake_buffer_, 1, MPI_UINT64_T, MPI_ANY_SOURCE, kWakeTag, comm_, &wake_request_),
              "MPI_Irecv");
      int arrived = 0;
      check(MPI_Test(&wake_request_, &arrived, MPI_STATUS_IGNORE), "MPI_Test");  // resets it when arrived
      if (!arrived) return false;
      if (wake_buffer_ >= cycles_started_) return true;
      // Stale: asked for a cycle that rank 0 had already started for its own reasons.
    }
  }
  post_start_receive();
  int arrived = 0;
  check(MPI_Test(&start_request_, &arrived, MPI_STATUS_IGNORE), "MPI_Test");
  if (arrived) take_start();
  return arrived != 0;
}

void MpiControlChannel::ask_to_start() {
  check(MPI_Send(&cycles_started_, 1, MPI_UINT64_T, 0, kWakeTag, comm_), "MPI_Send");
}

void MpiControlChannel::announce_start() {
  for (int r = 1; r < size_; ++r) check(MPI_Send(&cycles_started_, 1, MPI_UINT64_T, r, kStartTag, comm_), "MPI_Send");
  ++cycles_started_;
}

void MpiControlChannel::await_start() {
  post_start_receive();
  wait(&start_request_);
  take_start();
}

void MpiControlChannel::post_start_receive() {
  if (start_request_ == MPI_REQUEST_NULL)
    check(MPI_Irecv(&start_buffer_, 1, MPI_UINT64_T, 0, kStartTag, comm_, &start_request_), "MPI_Irecv");
}

void MpiControlChannel::take_start() {
  if (start_buffer_ != cycles_started_)
    throw std::runtime_error("control channel out of step: rank 0 started cycle " + std::to_string(start_buffer_) +
                             " while this rank waited for cycle " + std::to_string(cycles_started_));
  ++cycles_started_;
}

void MpiControlChannel::close() {
  for (MPI_Request* request : {&wake_request_, &start_request_}) {
    if (*request == MPI_REQUEST_NULL) continue;
    MPI_Cancel(request);
    MPI_Wait(request, MPI_STATUS_IGNORE);
  }
}

void MpiControlChannel::bitwise_or(std::vector<std::uint64_t>& bits) {
  MPI_Request request;
  check(MPI_Iallreduce(MPI_IN_PLACE, bits.data(), static_cast<int>(bits.size()), MPI_UINT64_T, MPI_BOR, comm_,
                       &request),
        "MPI_Iallreduce");
  wait(&request);
}

}  // namespace hvd::detail
