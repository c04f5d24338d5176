// main() for the multi-process Catch2 programs: every rank runs the same test cases in the same
// order between hvd::init() and hvd::shutdown(); the exit code is non-zero if any test failed on
// this rank, so mpirun (and ctest) fail when any rank fails.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include <horovodcpp/horovod.h>

int main(int argc, char** argv) {
  hvd::init();
  Catch::Session session;
  // Keep one rank's output readable: each line of the report names the rank.
  std::fprintf(stderr, "rank %d of %d starting tests\n", hvd::rank(), hvd::size());
  int failed = session.run(argc, argv);
  hvd::shutdown();
  return failed == 0 ? 0 : 1;
}
