// Settings every rank must share: the comparison names each variable and each rank's value.
#include <catch2/catch.hpp>

#include <algorithm>

#include "core/controller.h"
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

TEST_CASE("the agreed values are the Shared declarations, then the backends", "[settings]") {
  const AgreedValues values = agreed_values(Settings{}, "MPI");
  std::vector<std::string> expected;
  for (const auto& spec : setting_specs())
    if (spec.scope == SettingScope::Shared) expected.push_back(spec.env);
  expected.push_back("backends compiled in");
  std::vector<std::string> names;
  for (const auto& [name, value] : values) names.push_back(name);
  CHECK(names == expected);
  for (const char* env : {"HOROVOD_FUSION_THRESHOLD", "HOROVOD_CACHE_CAPACITY", "HOROVOD_CYCLE_TIME",
                          "HOROVOD_HIERARCHICAL_ALLREDUCE", "HOROVOD_CPU_OPERATIONS", "HOROVOD_GPU_OPERATIONS",
                          "HOROVOD_AUTOTUNE", "HOROVOD_DYNAMIC_PROCESS_SETS"})
    CHECK(std::find(names.begin(), names.end(), env) != names.end());
  Settings b;
  b.dynamic_process_sets = true;
  CHECK_THAT(describe_disagreement({agreed_values(Settings{}, "MPI"), agreed_values(b, "MPI")}),
             Catch::Contains("HOROVOD_DYNAMIC_PROCESS_SETS: 0 on rank 0; 1 on rank 1"));
}

TEST_CASE("controller, stall and watchdog options come from the settings", "[settings]") {
  const ControllerOptions defaults;
  CHECK(defaults.fusion_threshold_bytes == default_settings().fusion_threshold_bytes);
  CHECK(defaults.cache_capacity == default_settings().cache_capacity);
  CHECK(defaults.stall.enabled);
  CHECK(defaults.stall.warning_seconds == default_settings().stall_check_seconds);
  Settings s;
  s.fusion_threshold_bytes = 5;
  s.cache_capacity = 6;
  s.stall_check_disabled = true;
  s.stall_shutdown_seconds = 9;
  const ControllerOptions built = controller_options(s);
  CHECK(built.fusion_threshold_bytes == 5);
  CHECK(built.cache_capacity == 6);
  CHECK_FALSE(built.stall.enabled);
  CHECK(built.stall.shutdown_seconds == 9);
  // The watchdog: liveness timeout by default; a set, shorter stall shutdown wins.
  const WatchdogOptions plain;
  CHECK(plain.fatal_seconds == default_settings().liveness_timeout_seconds);
  CHECK(plain.fatal_setting == "HOROVOD_LIVENESS_TIMEOUT_SECONDS");
  CHECK(plain.warning_seconds == default_settings().stall_check_seconds);
  const WatchdogOptions stalled(s);
  CHECK(stalled.fatal_seconds == 9);
  CHECK(stalled.fatal_setting == "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS");
  CHECK(stalled.warning_seconds == 0);  // stall check disabled
}
