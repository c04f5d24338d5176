#include "core/settings.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "horovodcpp/horovod.h"

namespace hvd::detail {
namespace {

const std::vector<SettingSpec> kSpecs = {
    {"HOROVOD_FUSION_THRESHOLD", "fusion-threshold-mb", SettingKind::Bytes, "134217728", "",
     "Fuse tensors into one collective up to this many bytes (0 disables fusion)."},
    {"HOROVOD_CYCLE_TIME", "cycle-time-ms", SettingKind::Milliseconds, "1", "",
     "Minimum period of the background negotiation cycle, in milliseconds."},
    {"HOROVOD_CACHE_CAPACITY", "cache-capacity", SettingKind::Count, "1024", "",
     "Responses remembered so repeated tensors skip negotiation (0 disables the cache)."},
    {"HOROVOD_TIMELINE", "timeline-filename", SettingKind::Path, "", "",
     "Write a Chrome-trace timeline of every operation to this file."},
    {"HOROVOD_TIMELINE_MARK_CYCLES", "timeline-mark-cycles", SettingKind::Flag, "0", "",
     "Mark each background cycle in the timeline."},
    {"HOROVOD_TIMELINE_ALL_RANKS", "timeline-all-ranks", SettingKind::Flag, "0", "",
     "Every rank records its own timeline to PATH.rankN (rank 0 alone otherwise)."},
    {"HOROVOD_STALL_CHECK_DISABLE", "no-stall-check", SettingKind::Flag, "0", "",
     "Disable the stall inspector."},
    {"HOROVOD_STALL_CHECK_TIME_SECONDS", "stall-check-warning-time-seconds", SettingKind::Seconds,
     "60", "", "Warn when some ranks submitted a tensor and others have not for this long."},
    {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "stall-check-shutdown-time-seconds",
     SettingKind::Seconds, "0", "",
     "Fail every rank when a stall lasts this long (0: warn only)."},
    {"HOROVOD_LIVENESS_TIMEOUT_SECONDS", "liveness-timeout-seconds", SettingKind::Seconds, "1800", "",
     "End the job when a background cycle waits this long for ranks that stopped running (0: never)."},
    {"HOROVOD_START_TIMEOUT", "", SettingKind::Seconds, "30", "",
     "hvd::init() fails, naming the late ranks, when not every rank reaches it within this time "
     "(0: wait without limit; hvdrun --start-timeout sets it)."},
    {"HOROVOD_HIERARCHICAL_ALLREDUCE", "hierarchical-allreduce", SettingKind::Flag, "0", "",
     "Allreduce within each node, then across nodes, then within each node again."},
    {"HOROVOD_DYNAMIC_PROCESS_SETS", "dynamic-process-sets", SettingKind::Flag, "0", "",
     "Allow hvd::add_process_set() and hvd::remove_process_set() after hvd::init()."},
    {"HOROVOD_AUTOTUNE", "autotune", SettingKind::Flag, "0", "",
     "Tune the fusion threshold and cycle time while training."},
    {"HOROVOD_LOG_LEVEL", "log-level", SettingKind::Choice, "warning",
     "trace,debug,info,warning,error,fatal", "Runtime log level."},
    {"HOROVOD_CPU_OPERATIONS", "", SettingKind::Choice, "", "mpi",
     "Backend for host tensors (default: automatic)."},
    {"HOROVOD_GPU_OPERATIONS", "", SettingKind::Choice, "", "nccl,mpi",
     "Backend for GPU tensors (default: automatic, NCCL when built)."},
};

constexpr double kMaxMilliseconds = 60000;
constexpr double kMaxSeconds = 365.0 * 24 * 3600;

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::optional<long long> parse_integer(const std::string& text) {
  if (text.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end != text.c_str() + text.size()) return std::nullopt;
  return v;
}

std::optional<double> parse_number(const std::string& text) {
  if (text.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || end != text.c_str() + text.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<bool> parse_flag(const std::string& text) {
  std::string t = lower(text);
  if (t == "1" || t == "true" || t == "yes" || t == "on") return true;
  if (t == "0" || t == "false" || t == "no" || t == "off" || t.empty()) return false;
  return std::nullopt;
}

std::string accepted_form(const SettingSpec& spec) {
  switch (spec.kind) {
    case SettingKind::Bytes: return "a whole number of bytes >= 0";
    case SettingKind::Count: return "a whole number >= 0";
    case SettingKind::Milliseconds: return "a number of milliseconds > 0 and <= 60000";
    case SettingKind::Seconds: return "a number of seconds >= 0 and <= 31536000 (a year)";
    case SettingKind::Flag: return "0 or 1 (also true/false, yes/no, on/off)";
    case SettingKind::Path: return "a file path";
    case SettingKind::Choice: return std::string("one of: ") + spec.choices;
  }
  return "";
}

}  // namespace

const std::vector<SettingSpec>& setting_specs() { return kSpecs; }

const SettingSpec* find_setting(const std::string& env) {
  for (const auto& s : kSpecs)
    if (env == s.env) return &s;
  return nullptr;
}

std::optional<std::string> validate_setting(const SettingSpec& spec, const std::string& raw) {
  const std::string value = trim(raw);
  bool good = true;
  switch (spec.kind) {
    case SettingKind::Bytes:
    case SettingKind::Count: {
      auto v = parse_integer(value);
      good = v && *v >= 0;
      break;
    }
    case SettingKind::Milliseconds: {  // bounded: periods become integer nanoseconds
      auto v = parse_number(value);
      good = v && *v > 0 && *v <= kMaxMilliseconds;
      break;
    }
    case SettingKind::Seconds: {
      auto v = parse_number(value);
      good = v && *v >= 0 && *v <= kMaxSeconds;
      break;
    }
    case SettingKind::Flag: good = parse_flag(value).has_value(); break;
    case SettingKind::Path: good = true; break;
    case SettingKind::Choice: {
      if (value.empty()) break;
      good = false;
      std::stringstream choices(spec.choices);
      std::string c;
      while (std::getline(choices, c, ','))
        if (lower(value) == c) good = true;
      break;
    }
  }
  if (good) return std::nullopt;
  return std::string(spec.env) + "='" + raw + "' is not valid: expected " + accepted_form(spec);
}

Settings read_settings(const EnvLookup& lookup) {
  Settings s;
  std::vector<std::string> errors;
  auto get = [&](const char* env) -> std::optional<std::string> {
    const SettingSpec* spec = find_setting(env);
    const char* raw = lookup(env);
    if (raw == nullptr) return std::nullopt;
    if (auto err = validate_setting(*spec, raw)) {
      errors.push_back(*err);
      return std::nullopt;
    }
    return trim(raw);
  };
  if (auto v = get("HOROVOD_FUSION_THRESHOLD")) s.fusion_threshold_bytes = *parse_integer(*v);
  if (auto v = get("HOROVOD_CYCLE_TIME")) s.cycle_time_ms = *parse_number(*v);
  if (auto v = get("HOROVOD_CACHE_CAPACITY")) s.cache_capacity = *parse_integer(*v);
  if (auto v = get("HOROVOD_TIMELINE")) s.timeline_path = *v;
  if (auto v = get("HOROVOD_TIMELINE_MARK_CYCLES")) s.timeline_mark_cycles = *parse_flag(*v);
  if (auto v = get("HOROVOD_TIMELINE_ALL_RANKS")) s.timeline_all_ranks = *parse_flag(*v);
  if (auto v = get("HOROVOD_STALL_CHECK_DISABLE")) s.stall_check_disabled = *parse_flag(*v);
  if (auto v = get("HOROVOD_STALL_CHECK_TIME_SECONDS")) s.stall_check_seconds = *parse_number(*v);
  if (auto v = get("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS")) s.stall_shutdown_seconds = *parse_number(*v);
  if (auto v = get("HOROVOD_LIVENESS_TIMEOUT_SECONDS")) s.liveness_timeout_seconds = *parse_number(*v);
  if (auto v = get("HOROVOD_START_TIMEOUT")) s.start_timeout_seconds = *parse_number(*v);
  if (auto v = get("HOROVOD_HIERARCHICAL_ALLREDUCE")) s.hierarchical_allreduce = *parse_flag(*v);
  if (auto v = get("HOROVOD_AUTOTUNE")) s.autotune = *parse_flag(*v);
  if (auto v = get("HOROVOD_DYNAMIC_PROCESS_SETS")) s.dynamic_process_sets = *parse_flag(*v);
  if (auto v = get("HOROVOD_LOG_LEVEL"); v && !v->empty()) s.log_level = lower(*v);
  if (auto v = get("HOROVOD_CPU_OPERATIONS")) s.cpu_operations = lower(*v);
  if (auto v = get("HOROVOD_GPU_OPERATIONS")) s.gpu_operations = lower(*v);
  if (!errors.empty()) {
    std::string message = "horovodcpp: bad environment setting";
    for (const auto& e : errors) message += "\n  " + e;
    throw Error(message);
  }
  return s;
}

std::vector<std::string> unknown_setting_warnings(const std::vector<std::string>& names) {
  std::vector<std::string> warnings;
  for (const auto& name : names) {
    if (name.rfind("HOROVOD_", 0) != 0 || find_setting(name) != nullptr) continue;
    const SettingSpec* closest = nullptr;
    std::size_t best = 0;
    for (const auto& spec : kSpecs) {
      const std::string known = spec.env;
      // A name that is the start of a known one (or the reverse) is the likeliest typo.
      const bool prefix = known.rfind(name, 0) == 0 || name.rfind(known, 0) == 0;
      const std::size_t d = prefix ? 1 : edit_distance(name, known);
      if (closest == nullptr || d < best) closest = &spec, best = d;
    }
    std::string message = name + " is not a horovodcpp setting and is ignored";
    if (closest != nullptr && best <= std::max<std::size_t>(3, name.size() / 4))
      message += " (did you mean " + std::string(closest->env) + "?)";
    warnings.push_back(message);
  }
  return warnings;
}

Settings read_settings_from_environment() {
  return read_settings([](const char* name) { return std::getenv(name); });
}

}  // namespace hvd::detail
