#include "discovery.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "horovodcpp/horovod.h"
#include "spawn.h"

namespace hvd::launcher {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kMaxOutput = 1 << 20;

std::string trimmed(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

std::string last_line(const std::string& text) {
  std::string last;
  std::stringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (!trimmed(line).empty()) last = trimmed(line);
  return last.size() > 200 ? last.substr(0, 200) + "..." : last;
}

// Reads both pipes until they close or the deadline passes; false on timeout.
// Each fd is set to -1 once closed.
bool read_until_closed(int fds[2], Clock::time_point deadline, std::string* out, std::string* err) {
  std::string* sinks[2] = {out, err};
  while (fds[0] >= 0 || fds[1] >= 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd p[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
    if (poll(p, 2, static_cast<int>(left.count())) < 0 && errno != EINTR) return false;
    for (int i = 0; i < 2; ++i) {
      if (fds[i] < 0 || (p[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      char buffer[4096];
      const ssize_t n = read(fds[i], buffer, sizeof buffer);
      if (n > 0 && sinks[i]->size() < kMaxOutput) sinks[i]->append(buffer, static_cast<std::size_t>(n));
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
        close(fds[i]);
        fds[i] = -1;
      }
    }
  }
  return true;
}

}  // namespace

std::vector<HostSlots> parse_discovery_output(const std::string& output, const std::string& script,
                                              int slots_per_host) {
  std::vector<HostSlots> hosts;
  std::stringstream lines(output);
  int number = 0;
  for (std::string raw; std::getline(lines, raw);) {
    ++number;
    std::string line = trimmed(raw.substr(0, raw.find('#')));
    if (line.empty()) continue;
    const auto bad = [&](const std::string& why) {
      return Error("host discovery script '" + script + "' line " + std::to_string(number) +
                   ": '" + trimmed(raw).substr(0, 200) + "': " + why);
    };
    HostSlots h;
    h.slots = slots_per_host;
    const auto colon = line.rfind(':');
    h.host = trimmed(line.substr(0, colon));
    if (colon != std::string::npos) {
      const std::string slots = trimmed(line.substr(colon + 1));
      if (slots.empty() || slots.size() > 6 || slots.find_first_not_of("0123456789") != std::string::npos ||
          std::stoi(slots) < 1)
        throw bad("expected HOST or HOST:SLOTS with SLOTS a whole number >= 1");
      h.slots = std::stoi(slots);
    }
    if (const std::string why = host_name_problem(h.host); !why.empty())
      throw bad("expected HOST or HOST:SLOTS; " + why);
    for (const auto& seen : hosts)
      if (seen.host == h.host) throw bad("host '" + h.host + "' is listed twice");
    hosts.push_back(h);
  }
  return hosts;
}

std::vector<HostSlots> discover_hosts(const std::string& script, int slots_per_host,
                                      const Environment& env, std::chrono::milliseconds timeout) {
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) throw Error("host discovery: cannot create a pipe");
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    throw Error("host discovery: cannot create a pipe");
  }
  SpawnOptions options;
  options.stdout_fd = out[1];
  options.stderr_fd = err[1];
  options.own_process_group = true;  // a hung script is killed with everything it started
  options.parent_death_signal = SIGKILL;
  pid_t pid = -1;
  try {
    pid = spawn_process("/bin/sh", {"/bin/sh", "-c", script}, env, options);
  } catch (...) {
    for (int fd : {out[0], out[1], err[0], err[1]}) close(fd);
    throw;
  }
  close(out[1]);
  close(err[1]);
  std::string output, errors;
  int fds[2] = {out[0], err[0]};
  const bool finished = read_until_closed(fds, Clock::now() + timeout, &output, &errors);
  if (!finished) kill(-pid, SIGKILL);
  for (int fd : fds)
    if (fd >= 0) close(fd);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!finished)
    throw Error("host discovery script '" + script + "' did not finish within " +
                std::to_string(timeout.count() / 1000) + " s (killed)");
  const std::string said = last_line(errors);
  const std::string tail = said.empty() ? std::string() : "; its last error line: '" + said + "'";
  if (WIFSIGNALED(status))
    throw Error("host discovery script '" + script + "' was killed by signal " +
                std::to_string(WTERMSIG(status)) + tail);
  if (WEXITSTATUS(status) != 0)
    throw Error("host discovery script '" + script + "' exited with code " +
                std::to_string(WEXITSTATUS(status)) + tail);
  return parse_discovery_output(output, script, slots_per_host);
}

}  // namespace hvd::launcher
