// Lets the ranks of a test program leave together. Open MPI's mpirun kills the ranks still
// running as soon as one exits non-zero or by a signal, so a rank that exits first can cut short
// what a slower rank still had to print or write. Each rank about to exit marks the file
// "<prefix><rank>" and waits until ranks 0..count-1 have marked theirs, at most `bound` (a rank
// that never marks, killed or stopped, costs the others that long).
#pragma once

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

namespace hvd::test {

inline void mark_and_wait_for_ranks(const std::string& prefix, int rank, int count, std::chrono::milliseconds bound) {
  std::ofstream(prefix + std::to_string(rank)) << rank << "\n";
  const auto give_up = std::chrono::steady_clock::now() + bound;
  for (int r = 0; r < count; ++r)
    while (access((prefix + std::to_string(r)).c_str(), F_OK) != 0 && std::chrono::steady_clock::now() < give_up)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

}  // namespace hvd::test
