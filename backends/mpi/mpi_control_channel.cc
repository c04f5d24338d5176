#include "backends/mpi/mpi_control_channel.h"

#include <chrono>
#include <numeric>
#include <stdexcept>
#include <thread>

#include "backends/mpi/mpi_types.h"

namespace hvd::detail {
namespace {

void check(int code, const char* call) {
  if (code != MPI_SUCCESS) throw std::runtime_error(mpi_error_message(call, code));
}

}  // namespace

void wait_without_spinning(MPI_Request* request) {
  using Clock = std::chrono::steady_clock;
  int done = 0;
  check(MPI_Test(request, &done, MPI_STATUS_IGNORE), "MPI_Test");
  // A few microseconds of polling catch the common case where every rank is already there;
  // after that, sleeps that double up to 500 us keep a waiting rank off the cores.
  const auto spin_until = Clock::now() + std::chrono::microseconds(10);
  while (!done && Clock::now() < spin_until) check(MPI_Test(request, &done, MPI_STATUS_IGNORE), "MPI_Test");
  auto pause = std::chrono::microseconds(20);
  while (!done) {
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(500));
    check(MPI_Test(request, &done, MPI_STATUS_IGNORE), "MPI_Test");
  }
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
  wait_without_spinning(&request);
  std::vector<int> displacements(sizes.size(), 0);
  if (rank_ == 0) std::exclusive_scan(sizes.begin(), sizes.end(), displacements.begin(), 0);
  std::vector<std::uint8_t> all(rank_ == 0 ? std::accumulate(sizes.begin(), sizes.end(), 0) : 0);
  check(MPI_Igatherv(mine.data(), my_size, MPI_BYTE, all.data(), sizes.data(), displacements.data(), MPI_BYTE, 0,
                     comm_, &request),
        "MPI_Igatherv");
  wait_without_spinning(&request);
  std::vector<std::vector<std::uint8_t>> out;
  for (std::size_t r = 0; r < sizes.size(); ++r)
    out.emplace_back(all.begin() + displacements[r], all.begin() + displacements[r] + sizes[r]);
  return out;
}

std::vector<std::uint8_t> MpiControlChannel::broadcast(const std::vector<std::uint8_t>& from_coordinator) {
  int length = static_cast<int>(from_coordinator.size());
  MPI_Request request;
  check(MPI_Ibcast(&length, 1, MPI_INT, 0, comm_, &request), "MPI_Ibcast");
  wait_without_spinning(&request);
  std::vector<std::uint8_t> bytes = rank_ == 0 ? from_coordinator : std::vector<std::uint8_t>(length);
  check(MPI_Ibcast(bytes.data(), length, MPI_BYTE, 0, comm_, &request), "MPI_Ibcast");
  wait_without_spinning(&request);
  return bytes;
}

void MpiControlChannel::bitwise_and(std::vector<std::uint64_t>& bits) {
  MPI_Request request;
  check(MPI_Iallreduce(MPI_IN_PLACE, bits.data(), static_cast<int>(bits.size()), MPI_UINT64_T, MPI_BAND, comm_,
                       &request),
        "MPI_Iallreduce");
  wait_without_spinning(&request);
}

namespace {
constexpr int kWakeTag = 7001;
constexpr int kResumeTag = 7002;
// How long an idle rank sleeps between checks for a remote wake-up: short at first, longer the
// longer the runtime idles (each check costs tens of microseconds inside Open MPI's progress
// engine). A rank with work of its own never waits this long: it is woken at once.
std::chrono::microseconds idle_poll_interval(std::chrono::steady_clock::time_point idle_since) {
  const auto idle = std::chrono::steady_clock::now() - idle_since;
  if (idle < std::chrono::milliseconds(100)) return std::chrono::microseconds(1000);
  if (idle < std::chrono::milliseconds(1000)) return std::chrono::microseconds(2000);
  return std::chrono::microseconds(8000);
}
}  // namespace

void MpiControlChannel::idle_wait(const LocalWorkWait& wait_for_local_work) {
  const auto idle_since = std::chrono::steady_clock::now();
  int token = 0;
  if (rank_ == 0) {
    if (wake_request_ == MPI_REQUEST_NULL)
      check(MPI_Irecv(&wake_buffer_, 1, MPI_INT, MPI_ANY_SOURCE, kWakeTag, comm_, &wake_request_), "MPI_Irecv");
    while (true) {
      if (wait_for_local_work(idle_poll_interval(idle_since))) break;
      int woken = 0;
      check(MPI_Test(&wake_request_, &woken, MPI_STATUS_IGNORE), "MPI_Test");
      if (woken) break;  // MPI_Test reset the request to MPI_REQUEST_NULL
    }
    for (int r = 1; r < size_; ++r) check(MPI_Send(&token, 1, MPI_INT, r, kResumeTag, comm_), "MPI_Send");
    return;
  }
  MPI_Request resume;
  check(MPI_Irecv(&token, 1, MPI_INT, 0, kResumeTag, comm_, &resume), "MPI_Irecv");
  bool asked = false;
  while (true) {
    int resumed = 0;
    check(MPI_Test(&resume, &resumed, MPI_STATUS_IGNORE), "MPI_Test");
    if (resumed) return;
    if (asked) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    } else if (wait_for_local_work(idle_poll_interval(idle_since))) {
      check(MPI_Send(&token, 1, MPI_INT, 0, kWakeTag, comm_), "MPI_Send");
      asked = true;
    }
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
  wait_without_spinning(&request);
}

}  // namespace hvd::detail
