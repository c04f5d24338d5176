// The custom main shared by the multi-process timeline tests: every rank runs the same Catch2
// session between hvd::init() and hvd::shutdown(); a failure on any rank fails the program, and
// with several ranks the first one ends the job at once (tests/common/every_rank_session.h).
#pragma once

#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "horovodcpp/horovod.h"
#include "tests/common/every_rank_session.h"

namespace hvd::timeline::test {

inline int run_mpi_catch_session(int argc, char** argv) {
  hvd::init();
  return hvd::test::run_session_on_every_rank(argc, argv);
}

}  // namespace hvd::timeline::test
