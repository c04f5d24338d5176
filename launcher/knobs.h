// The knob flags of hvdrun (--fusion-threshold-mb, --no-stall-check, ...): one per HOROVOD_*
// setting in horovodcpp/core/settings.h that names a flag, so hvdrun and hvd::init() agree on
// names, defaults and accepted values. Used on the main thread while parsing the command line.
#pragma once

#include <string>
#include <vector>

#include "environment.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace hvd::launcher {

// Holds what CLI11 parsed for each knob flag; owned by the parser, filled by CLI::App::parse.
class KnobFlags {
 public:
  // Adds one flag per setting (group "Horovod knobs"); the help text names the variable.
  void add_to(CLI::App& app);
  // HOROVOD_* variables for the flags given, in table order, each validated like hvd::init()
  // would. Throws hvd::Error naming the flag, the variable and the accepted form.
  Environment environment() const;

 private:
  struct Entry {
    std::size_t spec_index;
    CLI::Option* option = nullptr;
    std::string value;
  };
  std::vector<Entry> entries_;
};

// --help's list of the HOROVOD_* variables that have no flag, each with its default.
std::string unflagged_knobs_help();

// Converts one flag value to the variable's value ("--fusion-threshold-mb 64" -> "67108864"),
// then validates it. Throws hvd::Error.
std::string knob_value_for_env(const std::string& env, const std::string& flag_value);

// Checks every HOROVOD_* variable of `env` that the settings table knows (not those in
// `overridden`), so a bad inherited value fails before launch. Throws hvd::Error listing them.
void validate_inherited_knobs(const Environment& env, const Environment& overridden);

}  // namespace hvd::launcher
