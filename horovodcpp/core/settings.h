// Every HOROVOD_* knob is declared once, in the table in settings.cc: variable, hvdrun flag,
// kind (which fixes the check), default, accepted choices, whether every rank must agree on it,
// the Settings member it fills, and help. The Settings defaults, read_settings, the agreement
// check at init (settings_agreement.h), the options of the controller, stall inspector and
// watchdog, and hvdrun's knob flags and --help all come from that table, so a default is
// written exactly once. A bad value is an error naming the variable and the accepted form,
// never a silent default. Depends on nothing but the standard library, so the launcher links
// it without MPI.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace hvd::detail {

enum class SettingKind { Bytes, Count, Milliseconds, Seconds, Number, Flag, Path, Choice };

// HOROVOD_TIMELINE's value that names no file: recording starts at hvd::start_timeline().
inline constexpr const char* kDynamicTimeline = "DYNAMIC";

// The values hvd::init() runs with. A default-constructed Settings holds every declared
// default (the constructor applies the table); the braces below only zero the members, the
// defaults are not written here.
struct Settings {
  Settings();

  std::int64_t fusion_threshold_bytes{};
  double cycle_time_ms{};
  std::int64_t cache_capacity{};
  std::string timeline_path;
  bool timeline_mark_cycles{};
  bool timeline_all_ranks{};
  bool stall_check_disabled{};
  double stall_check_seconds{};
  double stall_shutdown_seconds{};
  double liveness_timeout_seconds{};
  double start_timeout_seconds{};
  bool hierarchical_allreduce{};
  bool autotune{};
  std::string autotune_log_path;
  std::int64_t autotune_warmup_samples{};
  std::int64_t autotune_steps_per_sample{};
  std::int64_t autotune_bayes_opt_max_samples{};
  double autotune_gaussian_process_noise{};
  std::string log_level;
  bool log_hide_time{};          // log lines without the time of day
  std::string cpu_operations;    // "" (automatic) or "mpi"
  std::string gpu_operations;    // "" (automatic), "nccl" or "mpi"
  bool dynamic_process_sets{};   // hvd::add_process_set / remove_process_set allowed after init
  std::string elastic_job;       // hvdrun's elastic driver names the job (its commit store)
  std::string elastic_dir;       // where this host keeps the elastic job's commits
};

// The Settings member a declaration fills; its type follows the kind (Bytes/Count: int64,
// Milliseconds/Seconds/Number: double, Flag: bool, Path/Choice: string).
using SettingField = std::variant<std::int64_t Settings::*, double Settings::*, bool Settings::*,
                                  std::string Settings::*>;

// Whether ranks may differ: Shared settings shape the protocol or the collective schedule and
// are compared across ranks at hvd::init() (settings_agreement.h).
enum class SettingScope { PerRank, Shared };

struct SettingSpec {
  const char* env;            // HOROVOD_FUSION_THRESHOLD
  const char* flag;           // hvdrun flag without dashes, or "" when the launcher has none
  SettingKind kind;
  SettingField field;
  const char* default_value;  // as it would be written in the environment
  const char* choices;        // Choice: comma-separated accepted values (case-insensitive)
  SettingScope scope;
  const char* help;
  std::int64_t minimum = 0;   // Count: the smallest accepted value
};

const std::vector<SettingSpec>& setting_specs();
const SettingSpec* find_setting(const std::string& env);

// Checks one value against its spec. Returns the error message (naming the variable and the
// accepted form) or nothing when the value is good.
std::optional<std::string> validate_setting(const SettingSpec& spec, const std::string& value);

// The value of spec's member in `settings`, written as the environment would write it
// ("134217728", "2.5", "1", "warning"); used by the agreement check and the tests.
std::string setting_text(const SettingSpec& spec, const Settings& settings);

// The declared defaults, built once.
const Settings& default_settings();

using EnvLookup = std::function<const char*(const char* name)>;

// Reads every knob; throws hvd::Error listing every bad variable.
Settings read_settings(const EnvLookup& lookup);
Settings read_settings_from_environment();

// One warning per HOROVOD_* name (from `names`, e.g. the environment's) that is not in the
// table, naming the closest known variable when one is near: a typo must not pass silently.
std::vector<std::string> unknown_setting_warnings(const std::vector<std::string>& names);

}  // namespace hvd::detail
