// The settings table: defaults, parsing, and errors that name the variable.
#include <catch2/catch.hpp>

#include <map>

#include "core/settings.h"
#include "horovodcpp/horovod.h"

using namespace hvd::detail;

namespace {
Settings read(const std::map<std::string, std::string>& env) {
  return read_settings([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}
}  // namespace

TEST_CASE("defaults match Horovod's", "[settings]") {
  Settings s = read({});
  REQUIRE(s.fusion_threshold_bytes == 128LL * 1024 * 1024);
  REQUIRE(s.cycle_time_ms == 1.0);
  REQUIRE(s.cache_capacity == 1024);
  REQUIRE(s.stall_check_seconds == 60.0);
  REQUIRE(s.stall_shutdown_seconds == 0.0);
  REQUIRE_FALSE(s.hierarchical_allreduce);
  REQUIRE(s.log_level == "warning");
}

TEST_CASE("values are parsed", "[settings]") {
  Settings s = read({{"HOROVOD_FUSION_THRESHOLD", "1048576"},
                     {"HOROVOD_CYCLE_TIME", "2.5"},
                     {"HOROVOD_CACHE_CAPACITY", "0"},
                     {"HOROVOD_TIMELINE", "/tmp/t.json"},
                     {"HOROVOD_TIMELINE_MARK_CYCLES", "true"},
                     {"HOROVOD_HIERARCHICAL_ALLREDUCE", "1"},
                     {"HOROVOD_LOG_LEVEL", "DEBUG"},
                     {"HOROVOD_GPU_OPERATIONS", "NCCL"}});
  REQUIRE(s.fusion_threshold_bytes == 1048576);
  REQUIRE(s.cycle_time_ms == 2.5);
  REQUIRE(s.cache_capacity == 0);
  REQUIRE(s.timeline_path == "/tmp/t.json");
  REQUIRE(s.timeline_mark_cycles);
  REQUIRE(s.hierarchical_allreduce);
  REQUIRE(s.log_level == "debug");
  REQUIRE(s.gpu_operations == "nccl");
}

TEST_CASE("a bad value is an error naming the variable and the accepted form", "[settings]") {
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"HOROVOD_FUSION_THRESHOLD", "64MB", "whole number of bytes"},
      {"HOROVOD_FUSION_THRESHOLD", "-1", "whole number of bytes"},
      {"HOROVOD_CYCLE_TIME", "0", "milliseconds > 0"},
      {"HOROVOD_CYCLE_TIME", "fast", "milliseconds > 0"},
      {"HOROVOD_CACHE_CAPACITY", "1.5", "whole number"},
      {"HOROVOD_STALL_CHECK_TIME_SECONDS", "-3", "seconds >= 0"},
      {"HOROVOD_TIMELINE_MARK_CYCLES", "maybe", "0 or 1"},
      {"HOROVOD_LOG_LEVEL", "loud", "trace,debug,info,warning,error,fatal"},
      {"HOROVOD_CPU_OPERATIONS", "gloo", "one of: mpi"},
      {"HOROVOD_GPU_OPERATIONS", "rccl", "nccl,mpi"},
  };
  for (const auto& [name, value, accepted] : cases) {
    INFO(name << "=" << value);
    REQUIRE_THROWS_AS(read({{name, value}}), hvd::Error);
    REQUIRE_THROWS_WITH(read({{name, value}}), Catch::Contains(name + "='" + value + "'") && Catch::Contains(accepted));
  }
}

TEST_CASE("every bad variable is reported at once", "[settings]") {
  REQUIRE_THROWS_WITH(read({{"HOROVOD_CYCLE_TIME", "x"}, {"HOROVOD_CACHE_CAPACITY", "y"}}),
                      Catch::Contains("HOROVOD_CYCLE_TIME") && Catch::Contains("HOROVOD_CACHE_CAPACITY"));
}

TEST_CASE("the table lists every knob with a launcher flag", "[settings]") {
  for (const char* env : {"HOROVOD_FUSION_THRESHOLD", "HOROVOD_CYCLE_TIME", "HOROVOD_CACHE_CAPACITY",
                          "HOROVOD_TIMELINE", "HOROVOD_TIMELINE_MARK_CYCLES", "HOROVOD_STALL_CHECK_TIME_SECONDS",
                          "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "HOROVOD_HIERARCHICAL_ALLREDUCE",
                          "HOROVOD_AUTOTUNE", "HOROVOD_LOG_LEVEL"}) {
    const SettingSpec* spec = find_setting(env);
    REQUIRE(spec != nullptr);
    REQUIRE(std::string(spec->flag).size() > 0);
    REQUIRE_FALSE(validate_setting(*spec, spec->default_value).has_value());
  }
}

TEST_CASE("values past the bounds are refused naming the bound", "[settings]") {
  CHECK_THROWS_WITH(read({{"HOROVOD_CYCLE_TIME", "1e300"}}),
                    Catch::Contains("HOROVOD_CYCLE_TIME='1e300' is not valid: expected a number of milliseconds > 0 and <= 60000"));
  CHECK_THROWS_WITH(read({{"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "1e300"}}),
                    Catch::Contains("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS='1e300' is not valid") &&
                        Catch::Contains("<= 31536000"));
  CHECK_THROWS_WITH(read({{"HOROVOD_FUSION_THRESHOLD", "99999999999999999999"}}),
                    Catch::Contains("HOROVOD_FUSION_THRESHOLD='99999999999999999999' is not valid"));
  CHECK(read({{"HOROVOD_CYCLE_TIME", "60000"}, {"HOROVOD_LIVENESS_TIMEOUT_SECONDS", "31536000"}}).cycle_time_ms == 60000);
}

TEST_CASE("a misspelled HOROVOD_ variable gets a warning naming the closest one", "[settings]") {
  auto warnings = unknown_setting_warnings({"PATH", "HOROVOD_FUSION_THRESHOLDS", "HOROVOD_CYCLE_TIME",
                                            "HOROVOD_STALL_CHECK_TIME", "HOROVOD_WHATEVER_ELSE_ENTIRELY_XYZ"});
  REQUIRE(warnings.size() == 3);
  CHECK(warnings[0] == "HOROVOD_FUSION_THRESHOLDS is not a horovodcpp setting and is ignored (did you mean HOROVOD_FUSION_THRESHOLD?)");
  CHECK_THAT(warnings[1], Catch::Contains("HOROVOD_STALL_CHECK_TIME is not a horovodcpp setting") &&
                              Catch::Contains("did you mean HOROVOD_STALL_CHECK_TIME_SECONDS?"));
  CHECK(warnings[2] == "HOROVOD_WHATEVER_ELSE_ENTIRELY_XYZ is not a horovodcpp setting and is ignored");
}
