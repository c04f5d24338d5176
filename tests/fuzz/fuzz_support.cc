#include "fuzz_support.h"

#include <cstdio>
#include <cstdlib>

namespace hvd::fuzz {

FuzzRun::FuzzRun(const char* what, int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 10.0;
  seed_ = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : std::random_device{}();
  std::printf("%s fuzz: %.0f s, seed %llu\n", what, seconds, static_cast<unsigned long long>(seed_));
  end_ = std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace hvd::fuzz
