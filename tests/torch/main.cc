// Catch2 main for the multi-process torch tests: every rank runs the session between
// hvd::init() and hvd::shutdown(), and every rank exits non-zero when any rank failed.
// HVD_TEST_SPEC (set by CMake) selects the test cases of a registration.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "horovodcpp/horovod.h"

int main(int argc, char** argv) {
  hvd::init();
  std::vector<char*> args(argv, argv + argc);
  if (const char* spec = std::getenv("HVD_TEST_SPEC")) args.push_back(const_cast<char*>(spec));
  Catch::Session session;
  const int failed_here = session.run(static_cast<int>(args.size()), args.data());
  std::int64_t failed = failed_here != 0 ? 1 : 0;
  auto t = hvd::HostTensor::wrap(&failed, hvd::DataType::Int64, {1});
  hvd::allreduce_async(t, t, {hvd::ReduceOp::Sum, "torch_tests.failed_ranks"}).wait();
  hvd::shutdown();
  return failed > 0 ? 1 : 0;
}
