// The environment as hvdrun handles it: an ordered list of NAME=VALUE pairs, read once from the
// real process and then passed by value (tests build their own). Used on the main thread.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace hvd::launcher {

using Environment = std::vector<std::pair<std::string, std::string>>;

// `envp` as from main() or `environ`; entries without '=' are skipped.
Environment environment_from(char** envp);

// The value of `name`, or nullptr when it is not set.
const char* find_env(const Environment& env, const std::string& name);

// Replaces the value of `name`, or appends NAME=VALUE when it is not set.
void set_env(Environment* env, const std::string& name, const std::string& value);

// Names passed to mpirun with -x: every variable with a plain name, less CUDA_VISIBLE_DEVICES
// (each host keeps its own) and exported shell functions (BASH_FUNC_*), sorted.
std::vector<std::string> forwarded_names(const Environment& env);

}  // namespace hvd::launcher
