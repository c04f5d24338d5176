#include "program_path.h"

#include <sys/stat.h>
#include <unistd.h>

#include <sstream>

namespace hvd::launcher {
namespace {

// An executable regular file (access() alone accepts directories, which execve refuses).
bool executable_file(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::string find_program(const std::string& program, const Environment& env) {
  if (program.empty()) return {};
  if (program.find('/') != std::string::npos) return executable_file(program) ? program : std::string();
  const char* path = find_env(env, "PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    std::string full = (dir.empty() ? "." : dir) + "/" + program;
    if (executable_file(full)) return full;
  }
  return {};
}

std::string why_not_runnable(const std::string& program, const Environment& env) {
  auto describe = [](const std::string& path) -> std::string {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) return {};
    if (S_ISDIR(st.st_mode)) return "'" + path + "' is a directory";
    if (access(path.c_str(), X_OK) != 0) return "'" + path + "' is not executable (no execute permission: chmod +x)";
    return {};
  };
  if (program.find('/') != std::string::npos) {
    const std::string why = describe(program);
    return why.empty() ? "not found" : why;
  }
  const char* path = find_env(env, "PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string why = describe((dir.empty() ? "." : dir) + "/" + program);
    if (!why.empty()) return "not found as an executable in PATH; " + why;
  }
  return "not found (not an executable file and not in PATH)";
}

}  // namespace hvd::launcher
