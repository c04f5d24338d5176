#include "core/process_identity.h"

#include <signal.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

namespace hvd::detail {
namespace {

// Fields 3 (state) and 22 (start time) of /proc/PID/stat; false when the process is gone.
bool read_stat(long pid, char* state, std::uint64_t* start_time) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  const std::string stat((std::istreambuf_iterator<char>(in)), {});
  const auto paren = stat.rfind(')');  // the command name may contain spaces and parentheses
  if (paren == std::string::npos) return false;
  std::istringstream fields(stat.substr(paren + 1));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 3) *state = field[0];
    if (i == 22) {
      *start_time = std::strtoull(field.c_str(), nullptr, 10);
      return true;
    }
  }
  return false;
}

}  // namespace

std::uint64_t process_start_time(long pid) {
  char state = 0;
  std::uint64_t start_time = 0;
  return read_stat(pid, &state, &start_time) ? start_time : 0;
}

bool process_still_running(long pid, std::uint64_t start_time) {
  if (pid <= 0) return false;
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) return false;
  char state = 0;
  std::uint64_t started = 0;
  if (!read_stat(pid, &state, &started)) return start_time == 0;  // /proc cannot tell: the pid alone
  // A zombie (killed, not yet reaped, say by a container's init) runs no more.
  return state != 'Z' && state != 'X' && (start_time == 0 || start_time == started);
}

}  // namespace hvd::detail
