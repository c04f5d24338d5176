// main() for the multi-process Catch2 programs: every rank runs the same test cases in the same
// order between hvd::init() and hvd::shutdown(); a failure on any rank fails the program, and with
// several ranks the first one ends the job at once (tests/common/every_rank_session.h).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include <horovodcpp/horovod.h>

#include "tests/common/every_rank_session.h"

int main(int argc, char** argv) {
  hvd::init();
  // Keep one rank's output readable: each line of the report names the rank.
  std::fprintf(stderr, "rank %d of %d starting tests\n", hvd::rank(), hvd::size());
  return hvd::test::run_session_on_every_rank(argc, argv);
}
