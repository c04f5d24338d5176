#include "backends/mpi/mpi_liveness_channel.h"

#include <chrono>
#include <optional>
#include <thread>
#include <utility>

namespace hvd::detail {
namespace {
constexpr int kWaitingTag = 7101;
constexpr int kFailureTag = 7102;
constexpr int kSetFailureSeenTag = 7103;
constexpr int kFailureSeenTag = 7104;
constexpr int kAbortNoticeTag = 7105;
// How long a report may take to leave (a frozen peer never takes it).
constexpr std::chrono::seconds kSendBound{1};
const std::uint8_t kSeen = 1;  // the one word of a kFailureSeenTag message

// Receives every one-word message of `tag` that has arrived, passing got(source, word) each.
template <class Word, class Got>
void drain(MPI_Comm comm, int tag, MPI_Datatype type, Got got) {
  while (true) {
    int arrived = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, tag, comm, &arrived, &status) != MPI_SUCCESS || !arrived) return;
    Word word{};
    MPI_Recv(&word, 1, type, status.MPI_SOURCE, tag, comm, MPI_STATUS_IGNORE);
    got(status.MPI_SOURCE, word);
  }
}

// Sends `text` (which must outlive the sends) to every rank of `comm` but `self`; returns the sends.
std::vector<MPI_Request> send_to_others(MPI_Comm comm, int self, int size, const std::string& text, int tag) {
  std::vector<MPI_Request> sends;
  for (int r = 0; r < size; ++r) {
    if (r == self) continue;
    sends.push_back(MPI_REQUEST_NULL);
    MPI_Isend(text.data(), static_cast<int>(text.size()), MPI_CHAR, r, tag, comm, &sends.back());
  }
  return sends;
}

// One text message of `tag` that has arrived, with its sender, if any.
std::optional<std::pair<int, std::string>> receive_text(MPI_Comm comm, int tag) {
  int arrived = 0;
  MPI_Status status;
  if (MPI_Iprobe(MPI_ANY_SOURCE, tag, comm, &arrived, &status) != MPI_SUCCESS || !arrived) return std::nullopt;
  int count = 0;
  MPI_Get_count(&status, MPI_CHAR, &count);
  std::string text(static_cast<std::size_t>(count), '\0');
  MPI_Recv(text.data(), count, MPI_CHAR, status.MPI_SOURCE, tag, comm, MPI_STATUS_IGNORE);
  return std::make_pair(status.MPI_SOURCE, std::move(text));
}

// A send no peer has taken yet is cancelled and freed: a frozen or gone peer must not hold this rank.
void cancel_if_pending(MPI_Request& request) {
  if (request == MPI_REQUEST_NULL) return;
  int done = 0;
  MPI_Test(&request, &done, MPI_STATUS_IGNORE);
  if (done) return;
  MPI_Cancel(&request);
  MPI_Request_free(&request);
}
}  // namespace

MpiLivenessChannel::MpiLivenessChannel(MPI_Comm comm) : comm_(comm) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  sends_.assign(size_, MPI_REQUEST_NULL);
  payload_.assign(size_, 0);
}

void MpiLivenessChannel::send_waiting() {
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    if (sends_[r] != MPI_REQUEST_NULL) {
      int done = 0;
      MPI_Test(&sends_[r], &done, MPI_STATUS_IGNORE);
      if (!done) continue;
    }
    ++payload_[r];
    MPI_Isend(&payload_[r], 1, MPI_UINT64_T, r, kWaitingTag, comm_, &sends_[r]);
  }
}

std::vector<int> MpiLivenessChannel::receive_reports() {
  std::vector<int> from;
  drain<std::uint64_t>(comm_, kWaitingTag, MPI_UINT64_T, [&](int source, std::uint64_t) { from.push_back(source); });
  return from;
}

int MpiLivenessChannel::send_failure(const std::string& reason, std::chrono::milliseconds patience) {
  failure_ = reason;
  std::vector<MPI_Request> sent = send_to_others(comm_, rank_, size_, failure_, kFailureTag);
  // Bounded: a frozen peer must not hold this rank's shutdown.
  const auto start = std::chrono::steady_clock::now();
  const auto sends_until = start + kSendBound, seen_until = start + patience;
  std::vector<bool> seen(size_, false);
  int seen_count = 0;
  auto mark_seen = [&](int source) {
    if (!seen[source]) ++seen_count;
    seen[source] = true;
  };
  while (true) {
    drain<std::uint8_t>(comm_, kFailureSeenTag, MPI_UINT8_T, [&](int source, std::uint8_t) { mark_seen(source); });
    // A peer that stopped alone too waits in no collective of ours, and waits for our word likewise.
    while (const auto notice = receive_failure()) {
      mark_seen(notice->from);
      sent.push_back(MPI_REQUEST_NULL);
      MPI_Isend(&kSeen, 1, MPI_UINT8_T, notice->from, kFailureSeenTag, comm_, &sent.back());
    }
    int delivered = 0;
    if (MPI_Testall(static_cast<int>(sent.size()), sent.data(), &delivered, MPI_STATUSES_IGNORE) != MPI_SUCCESS) break;
    const auto now = std::chrono::steady_clock::now();
    const bool sends_over = delivered || now >= sends_until;
    const bool seen_over = seen_count == size_ - 1 || now >= seen_until;
    if (sends_over && seen_over) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (auto& request : sent) cancel_if_pending(request);
  return seen_count;
}

std::optional<FailureNotice> MpiLivenessChannel::receive_failure() {
  auto message = receive_text(comm_, kFailureTag);
  if (!message) return std::nullopt;
  auto& [from, reason] = *message;
  if (reason.empty()) reason = "rank " + std::to_string(from) + " stopped";
  return FailureNotice{from, std::move(reason)};
}

void MpiLivenessChannel::send_failure_seen(int rank) {
  if (rank == rank_ || rank < 0 || rank >= size_) return;
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Isend(&kSeen, 1, MPI_UINT8_T, rank, kFailureSeenTag, comm_, &request);
  const auto until = std::chrono::steady_clock::now() + kSendBound;
  int done = 0;
  while (MPI_Test(&request, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  cancel_if_pending(request);
}

void MpiLivenessChannel::send_abort_notice(const std::string& notice) {
  std::lock_guard<std::mutex> lock(abort_notices_mutex_);
  abort_notices_.remove_if([](AbortNotice& n) {
    int done = 0;
    MPI_Testall(static_cast<int>(n.requests.size()), n.requests.data(), &done, MPI_STATUSES_IGNORE);
    return done != 0;
  });
  AbortNotice& n = abort_notices_.emplace_back();
  n.text = notice;
  n.requests = send_to_others(comm_, rank_, size_, n.text, kAbortNoticeTag);
}

std::vector<std::string> MpiLivenessChannel::receive_abort_notices() {
  std::vector<std::string> notices;
  while (auto message = receive_text(comm_, kAbortNoticeTag)) notices.push_back(std::move(message->second));
  return notices;
}

void MpiLivenessChannel::send_set_failure_seen(int set_id, const std::vector<int>& ranks) {
  notices_.remove_if([](Notice& n) {
    int done = 0;
    MPI_Test(&n.request, &done, MPI_STATUS_IGNORE);
    return done != 0;
  });
  for (int r : ranks) {
    if (r == rank_ || r < 0 || r >= size_) continue;
    Notice& n = notices_.emplace_back();
    n.set_id = set_id;
    MPI_Isend(&n.set_id, 1, MPI_INT64_T, r, kSetFailureSeenTag, comm_, &n.request);
  }
}

std::vector<std::pair<int, int>> MpiLivenessChannel::receive_set_failures_seen() {
  std::vector<std::pair<int, int>> from;
  drain<std::int64_t>(comm_, kSetFailureSeenTag, MPI_INT64_T,
                      [&](int source, std::int64_t set_id) { from.emplace_back(source, static_cast<int>(set_id)); });
  return from;
}

void MpiLivenessChannel::close() {
  for (auto& request : sends_) cancel_if_pending(request);
  for (auto& n : notices_) cancel_if_pending(n.request);
  notices_.clear();
  {
    std::lock_guard<std::mutex> lock(abort_notices_mutex_);
    for (auto& n : abort_notices_)
      for (auto& request : n.requests) cancel_if_pending(request);
    abort_notices_.clear();
  }
  receive_abort_notices();
  receive_reports();
  receive_set_failures_seen();
  while (receive_failure()) {
  }
  drain<std::uint8_t>(comm_, kFailureSeenTag, MPI_UINT8_T, [](int, std::uint8_t) {});
}

}  // namespace hvd::detail
