// Catch2 main for the multi-process torch tests: every rank runs the session between
// hvd::init() and hvd::shutdown(); with several ranks the first failed assertion ends the job
// (tests/common/every_rank_session.h), so no rank is left waiting for one that left a test early.
// HVD_TEST_SPEC (set by CMake) selects the test cases of a registration.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdlib>
#include <vector>

#include "horovodcpp/horovod.h"
#include "tests/common/every_rank_session.h"

int main(int argc, char** argv) {
  hvd::init();
  std::vector<char*> args(argv, argv + argc);
  if (const char* spec = std::getenv("HVD_TEST_SPEC")) args.push_back(const_cast<char*>(spec));
  return hvd::test::run_session_on_every_rank(static_cast<int>(args.size()), args.data());
}
