// Shutdown: operations pending at shutdown fail with a clear error, and later calls too. These
// tests end the runtime, so they run in a program of their own, in this order.
#include <catch2/catch.hpp>

#include <dirent.h>

#include <fstream>
#include <string>
#include <vector>

#include "core/introspection.h"
#include "test_support.h"

using namespace hvd;

namespace {

struct NamedThread {
  long tid;
  std::string name;
};

std::vector<NamedThread> threads_of_this_process() {
  std::vector<NamedThread> out;
  DIR* dir = opendir("/proc/self/task");
  REQUIRE(dir != nullptr);
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    std::ifstream comm(std::string("/proc/self/task/") + entry->d_name + "/comm");
    std::string name;
    std::getline(comm, name);
    out.push_back({std::stol(entry->d_name), name});
  }
  closedir(dir);
  return out;
}

}  // namespace

// A stuck job is read from its threads' names (tests/common/bounded_job.sh): the threads MPI and
// PMIx start inside MPI_Init inherit the name of the thread that calls it, and used to pass for
// the background thread.
TEST_CASE("the background thread is the only thread named hvd-background", "[lifecycle]") {
  REQUIRE(hvd::is_initialized());
  const long background = hvd::detail::background_thread_id();
  int named = 0, from_init = 0;
  for (const auto& t : threads_of_this_process()) {
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
