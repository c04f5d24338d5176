// Shutdown: operations pending at shutdown fail with a clear error, and later calls too. These
// tests end the runtime, so they run in a program of their own, in this order.
#include <catch2/catch.hpp>

#include "core/introspection.h"
#include "test_support.h"
#include "tests/common/process_threads.h"

using namespace hvd;

// A stuck job is read from its threads' names (tests/common/bounded_job.sh): the threads MPI and
// PMIx start inside MPI_Init inherit the name of the thread that calls it, and used to pass for
// the background thread.
TEST_CASE("the background thread is the only thread named hvd-background", "[lifecycle]") {
  REQUIRE(hvd::is_initialized());
  const long background = hvd::detail::background_thread_id();
  const auto threads = hvd::test::threads_of_this_process();
  REQUIRE_FALSE(threads.empty());
  int named = 0, from_init = 0;
  for (const auto& t : threads) {
    if (t.name == "hvd-background") {
      CHECK(t.tid == background);
      ++named;
    }
    if (t.name == "hvd-bg-init") ++from_init;
  }
  INFO("threads named hvd-bg-init (started during MPI_Init): " << from_init);
  CHECK(named == 1);
}

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
