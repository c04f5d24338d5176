// Shutdown: operations pending at shutdown fail with a clear error, and later calls too. These
// tests end the runtime, so they run in a program of their own, in this order.
#include <catch2/catch.hpp>

#include "test_support.h"

using namespace hvd;

TEST_CASE("an operation pending at shutdown fails naming the tensor; later calls fail clearly", "[lifecycle]") {
  REQUIRE(hvd::is_initialized());
  const int rank = hvd::rank();
  auto t = HostTensor::allocate(DataType::Float32, {4});
  Handle pending;
  // Only rank 0 submits, so the tensor can never complete.
  if (rank == 0) pending = allreduce_async(t, t, {ReduceOp::Sum, "never.completes"});
  hvd::barrier();  // nobody shuts down before rank 0 has submitted
  hvd::shutdown();
  CHECK_FALSE(hvd::is_initialized());
  if (rank == 0) {
    CHECK_THROWS_WITH(pending.wait(), Catch::Contains("shut down before ALLREDUCE of tensor 'never.completes'"));
  }
  CHECK_THROWS_WITH(allreduce_async(t, t, {ReduceOp::Sum, "late"}), Catch::Contains("has been shut down"));
  CHECK_THROWS_WITH(hvd::rank(), Catch::Contains("hvd::rank()") && Catch::Contains("shut down"));
  CHECK_THROWS_WITH(hvd::barrier(), Catch::Contains("shut down"));
  CHECK_THROWS_WITH(hvd::init(), Catch::Contains("after hvd::shutdown() is not supported"));
  hvd::shutdown();  // a second shutdown is harmless
}
