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

}  // namespace hvd::launcher
