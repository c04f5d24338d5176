#include "knobs.h"

#include <CLI/CLI.hpp>
#include <cerrno>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "core/settings.h"
#include "horovodcpp/horovod.h"

namespace hvd::launcher {
namespace {

using hvd::detail::SettingKind;
using hvd::detail::SettingSpec;

constexpr double kBytesPerMegabyte = 1024.0 * 1024.0;

// Flags for byte sizes take megabytes, as horovodrun's do (--fusion-threshold-mb).
bool takes_megabytes(const SettingSpec& spec) {
  const std::string flag = spec.flag;
  return spec.kind == SettingKind::Bytes && flag.size() > 3 &&
         flag.compare(flag.size() - 3, 3, "-mb") == 0;
}

// "; one of: ...; default 60" from the declaration, as hvd::init() reads the default.
std::string accepted_and_default(const SettingSpec& spec) {
  std::string text;
  if (spec.kind == SettingKind::Choice) text += "; one of: " + std::string(spec.choices);
  const std::string declared = hvd::detail::setting_text(spec, hvd::detail::default_settings());
  if (spec.kind == SettingKind::Flag)
    text += declared == "1" ? "; on by default" : "; off by default";
  else if (declared.empty())
    text += "; unset by default";
  else if (takes_megabytes(spec))
    text += "; default " + std::to_string(std::atoll(declared.c_str()) / (1024 * 1024));
  else
    text += "; default " + declared;
  return text;
}

std::string flag_help(const SettingSpec& spec) {
  std::string help = std::string(spec.help) + " Sets " + spec.env;
  if (takes_megabytes(spec)) help += " (given in MB here, bytes in the variable)";
  return help + accepted_and_default(spec) + ".";
}

const char* value_name(const SettingSpec& spec) {
  switch (spec.kind) {
    case SettingKind::Bytes: return takes_megabytes(spec) ? "MB" : "BYTES";
    case SettingKind::Count: return "N";
    case SettingKind::Milliseconds: return "MS";
    case SettingKind::Seconds: return "SECONDS";
    case SettingKind::Number: return "NUMBER";
    case SettingKind::Path: return "PATH";
    case SettingKind::Choice: return "CHOICE";
    case SettingKind::Flag: break;
  }
  return "VALUE";
}

}  // namespace

void KnobFlags::add_to(CLI::App& app) {
  const auto& specs = hvd::detail::setting_specs();
  entries_.clear();
  entries_.reserve(specs.size());  // options keep pointers into entries_
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const SettingSpec& spec = specs[i];
    if (spec.flag[0] == '\0') continue;
    entries_.push_back(Entry{i, nullptr, {}});
    Entry& e = entries_.back();
    const std::string name = std::string("--") + spec.flag;
    if (spec.kind == SettingKind::Flag)
      e.option = app.add_flag(name)->description(flag_help(spec));
    else
      e.option = app.add_option(name, e.value, flag_help(spec))->type_name(value_name(spec));
    e.option->group("Horovod knobs (each sets a HOROVOD_* variable for every rank)");
  }
}

Environment KnobFlags::environment() const {
  const auto& specs = hvd::detail::setting_specs();
  Environment env;
  for (const Entry& e : entries_) {
    if (e.option->count() == 0) continue;
    const SettingSpec& spec = specs[e.spec_index];
    const std::string value = spec.kind == SettingKind::Flag ? "1" : e.value;
    env.emplace_back(spec.env, knob_value_for_env(spec.env, value));
  }
  return env;
}

std::string unflagged_knobs_help() {
  std::string text = "Variables without a flag (set them in the environment; hvdrun passes it to every rank):";
  for (const SettingSpec& spec : hvd::detail::setting_specs()) {
    if (spec.flag[0] != '\0') continue;
    std::string name = "  " + std::string(spec.env);
    name.resize(std::max<std::size_t>(name.size() + 2, 30), ' ');
    std::string tail = accepted_and_default(spec).substr(2);  // without the leading "; "
    tail[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(tail[0])));
    text += "\n" + name + spec.help + " " + tail + ".";
  }
  return text;
}

std::string knob_value_for_env(const std::string& env, const std::string& flag_value) {
  const SettingSpec* spec = hvd::detail::find_setting(env);
  if (spec == nullptr) throw hvd::Error("unknown setting " + env);
  const std::string flag = std::string("--") + spec->flag;
  std::string value = flag_value;
  if (takes_megabytes(*spec)) {
    errno = 0;
    char* end = nullptr;
    double mb = std::strtod(flag_value.c_str(), &end);
    // The bytes must fit in int64: 2^63 / 2^20 megabytes.
    constexpr double kMaxMegabytes = 8796093022208.0;
    if (flag_value.empty() || errno != 0 || *end != '\0' || !std::isfinite(mb) || mb < 0 || mb >= kMaxMegabytes)
      throw hvd::Error(flag + " '" + flag_value + "': expected a number of megabytes >= 0 and < 8796093022208");
    value = std::to_string(std::llround(mb * kBytesPerMegabyte));
  }
  if (auto error = hvd::detail::validate_setting(*spec, value))
    throw hvd::Error(flag + " '" + flag_value + "': " + *error);
  return value;
}

void validate_inherited_knobs(const Environment& env, const Environment& overridden) {
  std::string errors;
  for (const auto& [name, value] : env) {
    const SettingSpec* spec = hvd::detail::find_setting(name);
    if (spec == nullptr) continue;
    bool replaced = false;
    for (const auto& o : overridden) replaced = replaced || o.first == name;
    if (replaced) continue;
    if (auto error = hvd::detail::validate_setting(*spec, value))
      errors += (errors.empty() ? "" : "; ") + *error;
  }
  if (!errors.empty()) throw hvd::Error("bad value in the environment: " + errors);
}

}  // namespace hvd::launcher
