// The MPI control channel's gather_each (what every slow-path cycle without joins gathers
// through): rank 0 sees every rank's bytes once, in rank order, whatever their sizes (empty,
// small, above the shared-memory eager limit) and however few lists it receives at once; the
// other ranks see none.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include <horovodcpp/horovod.h>

#include "backends/mpi/mpi_control_channel.h"

using hvd::detail::MpiControlChannel;

namespace {

// What `rank` sends in `round`: sizes that differ between ranks and rounds, some empty, some
// large enough to need a posted receive; bytes that differ by rank and round.
std::vector<std::uint8_t> list_of(int rank, int round) {
  const std::size_t size = (rank + round) % 3 == 0 ? 0 : static_cast<std::size_t>(rank + 1) * (round % 2 ? 70000 : 13);
  std::vector<std::uint8_t> bytes(size);
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::uint8_t>(rank * 31 + round * 7 + i);
  return bytes;
}

}  // namespace

TEST_CASE("gather_each gives rank 0 every rank's bytes in rank order, through any receive window",
          "[control_channel]") {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int window : {1, 2, MpiControlChannel::kDefaultReceiveWindow}) {
    INFO("receive window " << window);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    {
      MpiControlChannel channel(comm, window);
      for (int round = 0; round < 4; ++round) {
        std::vector<int> seen;
        int wrong = 0;
        channel.gather_each(list_of(rank, round), [&](int from, const std::uint8_t* bytes, std::size_t n) {
          seen.push_back(from);
          if (std::vector<std::uint8_t>(bytes, bytes + n) != list_of(from, round)) ++wrong;
        });
        std::vector<int> expected;
        if (rank == 0)
          for (int r = 0; r < size; ++r) expected.push_back(r);
        CHECK(seen == expected);
        CHECK(wrong == 0);
      }
      channel.close();
    }
    MPI_Comm_free(&comm);
  }
}
