// Settings every rank must share: the comparison names each variable and each rank's value.
#include <catch2/catch.hpp>

#include "core/settings_agreement.h"
#include "core/watchdog.h"

using namespace hvd::detail;

TEST_CASE("ranks with different protocol settings are named with their values", "[settings]") {
  Settings a, b;
  b.fusion_threshold_bytes = 0;
  b.cycle_time_ms = 2.5;
  std::vector<AgreedValues> values{agreed_values(a, "MPI"), agreed_values(b, "MPI"), agreed_values(a, "NCCL, MPI")};
  const std::string message = describe_disagreement(values);
  CHECK_THAT(message, Catch::Contains("HOROVOD_FUSION_THRESHOLD: 0 on rank 1; 134217728 on ranks 0, 2"));
  CHECK_THAT(message, Catch::Contains("HOROVOD_CYCLE_TIME: 1 on ranks 0, 2; 2.5 on rank 1"));
  CHECK_THAT(message, Catch::Contains("backends compiled in: MPI on ranks 0, 1; NCCL, MPI on rank 2"));
  CHECK_THAT(message, !Catch::Contains("HOROVOD_CACHE_CAPACITY"));
  CHECK(describe_disagreement({agreed_values(a, "MPI"), agreed_values(a, "MPI")}).empty());
}

TEST_CASE("the watchdog names the ranks it has not heard from", "[watchdog]") {
  using Clock = std::chrono::steady_clock;
  const auto now = Clock::now();
  const auto fresh = std::chrono::seconds(1);
  std::vector<Clock::time_point> heard{now, {}, now - std::chrono::milliseconds(100), now - std::chrono::seconds(5)};
  CHECK(Watchdog::silent_ranks(heard, 0, now, fresh) == std::vector<int>{1, 3});
  CHECK(Watchdog::describe_ranks({1, 3}) == "ranks 1, 3");
  CHECK(Watchdog::describe_ranks({2}) == "rank 2");
  // Everyone answers: they all wait, so all of them are named.
  std::vector<Clock::time_point> all_heard{now, now, now};
  CHECK(Watchdog::silent_ranks(all_heard, 1, now, fresh) == std::vector<int>{0, 2});
}
