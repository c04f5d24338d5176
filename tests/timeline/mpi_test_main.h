// The custom main shared by the multi-process timeline tests: every rank runs the same Catch2
// session between hvd::init() and hvd::shutdown(), and the program fails if any rank failed.
#pragma once

#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "horovodcpp/horovod.h"

namespace hvd::timeline::test {

inline int run_mpi_catch_session(int argc, char** argv) {
  hvd::init();
  int failed = Catch::Session().run(argc, argv);
  auto count = hvd::HostTensor::allocate(hvd::DataType::Int32, {1});
  count->data_as<std::int32_t>()[0] = failed != 0 ? 1 : 0;
  hvd::allreduce_async(count, count, {hvd::ReduceOp::Sum, "timeline_test.failed_ranks"}).wait();
  const int failed_ranks = count->data_as<std::int32_t>()[0];
  hvd::shutdown();
  return failed_ranks != 0 ? 1 : 0;
}

}  // namespace hvd::timeline::test
