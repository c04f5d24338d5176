#include "environment.h"

#include <algorithm>
#include <cctype>

namespace hvd::launcher {
namespace {

bool plain_name(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '_';
  });
}

}  // namespace

Environment environment_from(char** envp) {
  Environment env;
  for (char** e = envp; e != nullptr && *e != nullptr; ++e) {
    std::string entry = *e;
    auto eq = entry.find('=');
    if (eq == std::string::npos) continue;
    env.emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

const char* find_env(const Environment& env, const std::string& name) {
  for (const auto& [k, v] : env)
    if (k == name) return v.c_str();
  return nullptr;
}

void set_env(Environment* env, const std::string& name, const std::string& value) {
  auto it = std::find_if(env->begin(), env->end(), [&](const auto& kv) { return kv.first == name; });
  if (it != env->end()) it->second = value;
  else env->emplace_back(name, value);
}

std::vector<std::string> forwarded_names(const Environment& env) {
  std::vector<std::string> names;
  for (const auto& kv : env) {
    const std::string& name = kv.first;
    if (!plain_name(name) || name == "_" || name == "CUDA_VISIBLE_DEVICES" ||
        name.rfind("BASH_FUNC_", 0) == 0)
      continue;
    names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace hvd::launcher
