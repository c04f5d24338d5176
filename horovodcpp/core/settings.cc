// Checks, reads and prints settings as their declarations (settings_table.cc) describe them.
#include "core/settings.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <type_traits>
#include <variant>

#include "horovodcpp/horovod.h"

namespace hvd::detail {
namespace {

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
    case SettingKind::Count: return "a whole number >= " + std::to_string(spec.minimum);
    case SettingKind::Milliseconds: return "a number of milliseconds > 0 and <= 60000";
    case SettingKind::Seconds: return "a number of seconds >= 0 and <= 31536000 (a year)";
    case SettingKind::Number: return "a number >= 0";
    case SettingKind::Flag: return "0 or 1 (also true/false, yes/no, on/off)";
    case SettingKind::Path: return "a file path";
    case SettingKind::Choice: return std::string("one of: ") + spec.choices;
  }
  return "";
}

// Writes a checked value into spec's member. An empty Choice means the declared default.
void store(const SettingSpec& spec, const std::string& checked, Settings& settings) {
  const std::string value = spec.kind == SettingKind::Choice && checked.empty() ? spec.default_value : checked;
  std::visit(
      [&](auto member) {
        using T = std::decay_t<decltype(settings.*member)>;
        if constexpr (std::is_same_v<T, std::int64_t>) settings.*member = *parse_integer(value);
        else if constexpr (std::is_same_v<T, double>) settings.*member = *parse_number(value);
        else if constexpr (std::is_same_v<T, bool>) settings.*member = *parse_flag(value);
        else settings.*member = spec.kind == SettingKind::Choice ? lower(value) : value;
      },
      spec.field);
}

}  // namespace

Settings::Settings() {
  for (const auto& spec : setting_specs()) store(spec, spec.default_value, *this);
}

const Settings& default_settings() {
  static const Settings kDefaults;
  return kDefaults;
}

std::string setting_text(const SettingSpec& spec, const Settings& settings) {
  return std::visit(
      [&](auto member) -> std::string {
        const auto& value = settings.*member;
        using T = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<T, std::int64_t>) return std::to_string(value);
        else if constexpr (std::is_same_v<T, double>) {
          // The shortest form that reads back exactly: "0.8", not "0.80000000000000004".
          std::string text;
          for (int digits = 15; digits <= 17; ++digits) {
            std::ostringstream out;
            out.precision(digits);
            out << value;
            text = out.str();
            if (std::strtod(text.c_str(), nullptr) == value) break;
          }
          return text;
        } else if constexpr (std::is_same_v<T, bool>) return value ? "1" : "0";
        else return value;
      },
      spec.field);
}

const SettingSpec* find_setting(const std::string& env) {
  for (const auto& s : setting_specs())
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
      good = v && *v >= spec.minimum;
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
    case SettingKind::Number: {
      auto v = parse_number(value);
      good = v && *v >= 0;
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
  Settings settings;
  std::vector<std::string> errors;
  for (const auto& spec : setting_specs()) {
    const char* raw = lookup(spec.env);
    if (raw == nullptr) continue;
    if (auto error = validate_setting(spec, raw))
      errors.push_back(*error);
    else
      store(spec, trim(raw), settings);
  }
  if (!errors.empty()) {
    std::string message = "horovodcpp: bad environment setting";
    for (const auto& e : errors) message += "\n  " + e;
    throw Error(message);
  }
  return settings;
}

std::vector<std::string> unknown_setting_warnings(const std::vector<std::string>& names) {
  std::vector<std::string> warnings;
  for (const auto& name : names) {
    if (name.rfind("HOROVOD_", 0) != 0 || find_setting(name) != nullptr) continue;
    const SettingSpec* closest = nullptr;
    std::size_t best = 0;
    for (const auto& spec : setting_specs()) {
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
