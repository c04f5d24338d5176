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

namespace {
// A value each kind refuses, and a valid value different from `spec`'s default.
std::string bad_value(const SettingSpec& spec) {
  return spec.kind == SettingKind::Flag ? "maybe" : "bogus";
}
std::string other_value(const SettingSpec& spec) {
  switch (spec.kind) {
    case SettingKind::Bytes:
    case SettingKind::Count:
    case SettingKind::Seconds: return std::string(spec.default_value) == "7" ? "8" : "7";
    case SettingKind::Milliseconds:
    case SettingKind::Number: return std::string(spec.default_value) == "2.5" ? "3.5" : "2.5";
    case SettingKind::Flag: return std::string(spec.default_value) == "1" ? "0" : "1";
    case SettingKind::Path: return "/tmp/other path.json";
    case SettingKind::Choice: {
      const std::string choices = spec.choices;
      const std::string first = choices.substr(0, choices.find(','));
      return first != spec.default_value ? first : choices.substr(choices.find(',') + 1, choices.find(',', first.size() + 1) - first.size() - 1);
    }
  }
  return "";
}
}  // namespace

TEST_CASE("every declaration: its default passes its check and is what an empty environment gives", "[settings]") {
  const Settings empty = read({});
  for (const auto& spec : setting_specs()) {
    INFO(spec.env);
    CHECK_FALSE(validate_setting(spec, spec.default_value).has_value());
    // Written in the canonical form, so --help and the agreement message show it as declared.
    CHECK(setting_text(spec, empty) == spec.default_value);
    CHECK(setting_text(spec, Settings{}) == spec.default_value);
    CHECK(setting_text(spec, default_settings()) == spec.default_value);
  }
}

TEST_CASE("every declaration: a bad value is refused naming the variable", "[settings]") {
  for (const auto& spec : setting_specs()) {
    if (spec.kind == SettingKind::Path) continue;  // every path is accepted
    INFO(spec.env);
    const std::string bad = bad_value(spec);
    CHECK_THROWS_WITH(read({{spec.env, bad}}), Catch::Contains(std::string(spec.env) + "='" + bad + "' is not valid"));
  }
}

TEST_CASE("every declaration fills its own member and no other", "[settings]") {
  for (const auto& spec : setting_specs()) {
    INFO(spec.env);
    const std::string value = other_value(spec);
    REQUIRE(value != spec.default_value);
    const Settings s = read({{spec.env, value}});
    CHECK(setting_text(spec, s) == value);
    for (const auto& other : setting_specs())
      if (&other != &spec) CHECK(setting_text(other, s) == other.default_value);
  }
}

TEST_CASE("HOROVOD_DYNAMIC_PROCESS_SETS: a flag, off by default, hvdrun --dynamic-process-sets", "[settings]") {
  const SettingSpec* spec = find_setting("HOROVOD_DYNAMIC_PROCESS_SETS");
  REQUIRE(spec != nullptr);
  CHECK(std::string(spec->flag) == "dynamic-process-sets");
  CHECK(spec->scope == SettingScope::Shared);
  CHECK_FALSE(read({}).dynamic_process_sets);
  CHECK(read({{"HOROVOD_DYNAMIC_PROCESS_SETS", "1"}}).dynamic_process_sets);
}

TEST_CASE("defaults of Horovod's knobs and c10d's liveness timeout", "[settings]") {
  const Settings s = read({});
  CHECK(s.liveness_timeout_seconds == 1800.0);
  CHECK(s.start_timeout_seconds == 30.0);
  CHECK_FALSE(s.stall_check_disabled);
  CHECK(s.cpu_operations.empty());
  CHECK(s.timeline_path.empty());
  CHECK(read({{"HOROVOD_LOG_LEVEL", ""}}).log_level == "warning");  // empty choice: the default
}

TEST_CASE("autotune settings: Horovod's defaults, hvdrun's flag names, checked values", "[settings][autotune]") {
  const Settings s = read({});
  CHECK(s.autotune_log_path.empty());
  CHECK(s.autotune_warmup_samples == 3);
  CHECK(s.autotune_steps_per_sample == 10);
  CHECK(s.autotune_bayes_opt_max_samples == 20);
  CHECK(s.autotune_gaussian_process_noise == 0.8);
  CHECK(std::string(find_setting("HOROVOD_AUTOTUNE_LOG")->flag) == "autotune-log-file");
  CHECK(std::string(find_setting("HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE")->flag) == "autotune-gaussian-process-noise");
  const Settings set = read({{"HOROVOD_AUTOTUNE_LOG", "/tmp/t.csv"}, {"HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "0"},
                             {"HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "1"}, {"HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "5"},
                             {"HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "0"}});
  CHECK(set.autotune_log_path == "/tmp/t.csv");
  CHECK(set.autotune_warmup_samples == 0);
  CHECK(set.autotune_steps_per_sample == 1);
  CHECK(set.autotune_bayes_opt_max_samples == 5);
  CHECK(set.autotune_gaussian_process_noise == 0.0);
  CHECK_THROWS_WITH(read({{"HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "0"}}),
                    Catch::Contains("HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE='0' is not valid: expected a whole number >= 1"));
  CHECK_THROWS_WITH(read({{"HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "-1"}}),
                    Catch::Contains("HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE='-1' is not valid: expected a number >= 0"));
  CHECK_THROWS_WITH(read({{"HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "-2"}}),
                    Catch::Contains("HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES='-2' is not valid: expected a whole number >= 0"));
  // Real numbers print as they read back: the declared default stays "0.8".
  CHECK(setting_text(*find_setting("HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE"), s) == "0.8");
}

TEST_CASE("hvdrun's elastic variables are declared: no rank warns about them, and they are read", "[settings]") {
  CHECK(unknown_setting_warnings({"HOROVOD_ELASTIC_JOB", "HOROVOD_ELASTIC_DIR"}).empty());
  const Settings s = read({{"HOROVOD_ELASTIC_JOB", "job7"}, {"HOROVOD_ELASTIC_DIR", "/data/commits"}});
  CHECK(s.elastic_job == "job7");
  CHECK(s.elastic_dir == "/data/commits");
  CHECK(find_setting("HOROVOD_ELASTIC_JOB")->scope == SettingScope::PerRank);
  CHECK(find_setting("HOROVOD_ELASTIC_DIR")->scope == SettingScope::PerRank);
}
