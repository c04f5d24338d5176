// Errors a user meets before the runtime runs: bad settings at init, calls before init.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "horovodcpp/horovod.h"

TEST_CASE("hvd::init() rejects a bad environment value, naming the variable", "[init]") {
  ::setenv("HOROVOD_CYCLE_TIME", "soon", 1);
  ::setenv("HOROVOD_FUSION_THRESHOLD", "lots", 1);
  REQUIRE_THROWS_AS(hvd::init(), hvd::Error);
  REQUIRE_THROWS_WITH(hvd::init(), Catch::Contains("HOROVOD_CYCLE_TIME='soon'") &&
                                       Catch::Contains("HOROVOD_FUSION_THRESHOLD='lots'"));
  ::unsetenv("HOROVOD_CYCLE_TIME");
  ::unsetenv("HOROVOD_FUSION_THRESHOLD");
  REQUIRE_FALSE(hvd::is_initialized());
}

TEST_CASE("calls before hvd::init() say so", "[init]") {
  REQUIRE_THROWS_WITH(hvd::rank(), Catch::Contains("hvd::rank()") && Catch::Contains("not initialized"));
  auto t = hvd::HostTensor::allocate(hvd::DataType::Float32, {2});
  REQUIRE_THROWS_WITH(hvd::allreduce_async(t, t, {}), Catch::Contains("call hvd::init() first"));
  REQUIRE_THROWS_WITH(hvd::join(), Catch::Contains("not initialized"));
}
