// Every HOROVOD_* knob in one table: name, hvdrun flag, kind, default, accepted form. hvd::init
// reads the environment through it once; hvdrun builds its flags and --help from it. A bad
// value is an error naming the variable and the accepted form, never a silent default.
// Depends on nothing but the standard library, so the launcher links it without MPI.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace hvd::detail {

enum class SettingKind { Bytes, Count, Milliseconds, Seconds, Flag, Path, Choice };

struct SettingSpec {
  const char* env;            // HOROVOD_FUSION_THRESHOLD
  const char* flag;           // hvdrun flag without dashes, or "" when the launcher has none
  SettingKind kind;
  const char* default_value;  // as it would be written in the environment
  const char* choices;        // Choice: comma-separated accepted values (case-insensitive)
  const char* help;
};

const std::vector<SettingSpec>& setting_specs();
const SettingSpec* find_setting(const std::string& env);

// Checks one value against its spec. Returns the error message (naming the variable and the
// accepted form) or nothing when the value is good.
std::optional<std::string> validate_setting(const SettingSpec& spec, const std::string& value);

struct Settings {
  std::int64_t fusion_threshold_bytes = 128LL * 1024 * 1024;
  double cycle_time_ms = 1.0;
  std::int64_t cache_capacity = 1024;
  std::string timeline_path;
  bool timeline_mark_cycles = false;
  bool timeline_all_ranks = false;
  bool stall_check_disabled = false;
  double stall_check_seconds = 60.0;
  double stall_shutdown_seconds = 0.0;
  double liveness_timeout_seconds = 1800.0;  // c10d's default collective timeout
  double start_timeout_seconds = 30.0;       // Horovod's HOROVOD_START_TIMEOUT default
  bool hierarchical_allreduce = false;
  bool autotune = false;
  bool dynamic_process_sets = false;  // HOROVOD_DYNAMIC_PROCESS_SETS
  std::string log_level = "warning";
  std::string cpu_operations;  // "" (automatic) or "mpi"
  std::string gpu_operations;  // "" (automatic), "nccl" or "mpi"
};

using EnvLookup = std::function<const char*(const char* name)>;

// Reads every knob; throws hvd::Error listing every bad variable.
Settings read_settings(const EnvLookup& lookup);
Settings read_settings_from_environment();

// One warning per HOROVOD_* name (from `names`, e.g. the environment's) that is not in the
// table, naming the closest known variable when one is near: a typo must not pass silently.
std::vector<std::string> unknown_setting_warnings(const std::vector<std::string>& names);

}  // namespace hvd::detail
