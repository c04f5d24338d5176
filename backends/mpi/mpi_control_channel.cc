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

void MpiControlChannel::bitwise_or(std::vector<std::uint64_t>& bits) {
  MPI_Request request;
  check(MPI_Iallreduce(MPI_IN_PLACE, bits.data(), static_cast<int>(bits.size()), MPI_UINT64_T, MPI_BOR, comm_,
                       &request),
        "MPI_Iallreduce");
  wait_without_spinning(&request);
}

}  // namespace hvd::detail
