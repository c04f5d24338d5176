#include "host_check.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <sstream>

#include "horovodcpp/horovod.h"

extern char** environ;

namespace hvd::launcher {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// The value of an MCA parameter given in --mpi-args as "-mca NAME VALUE" or "--mca NAME VALUE".
std::string mca_value(const std::string& mpi_args, const std::string& name) {
  auto w = words(mpi_args);
  for (std::size_t i = 0; i + 2 < w.size(); ++i)
    if ((w[i] == "-mca" || w[i] == "--mca") && w[i + 1] == name) return w[i + 2];
  return {};
}

bool same_address(const sockaddr* a, const std::string& text) {
  char buffer[INET6_ADDRSTRLEN] = {0};
  const void* raw = a->sa_family == AF_INET
                        ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(a)->sin_addr)
                        : static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr);
  return inet_ntop(a->sa_family, raw, buffer, sizeof buffer) != nullptr && text == buffer;
}

pid_t spawn_check(const std::vector<std::string>& argv, const Environment& env) {
  const std::string path = find_program(argv[0], env);
  if (path.empty()) throw hvd::Error("--start-timeout: host check agent '" + argv[0] + "' not found in PATH");
  std::vector<char*> c_argv;
  for (const auto& a : argv) c_argv.push_back(const_cast<char*>(a.c_str()));
  c_argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setpgroup(&attr, 0);  // killed as a group on timeout
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, path.c_str(), &actions, &attr, c_argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw hvd::Error("cannot start " + path + ": " + std::strerror(rc));
  return pid;
}

}  // namespace

std::vector<std::string> rsh_agent_command(const LaunchOptions& o, const Environment& env) {
  std::string agent = mca_value(o.mpi_args, "plm_rsh_agent");
  if (agent.empty()) {
    const char* from_env = find_env(env, "OMPI_MCA_plm_rsh_agent");
    if (from_env != nullptr) agent = from_env;
  }
  agent = agent.substr(0, agent.find(':'));  // "ssh : rsh" means ssh, else rsh
  auto argv = words(agent);
  if (argv.empty()) argv = {"ssh"};
  const std::string& name = argv[0];
  if (name == "ssh" || (name.size() > 4 && name.compare(name.size() - 4, 4, "/ssh") == 0))
    argv.insert(argv.begin() + 1, {"-o", "BatchMode=yes"});
  return argv;
}

std::vector<std::string> host_check_argv(const LaunchOptions& o, const Environment& env,
                                         const std::string& host) {
  auto argv = rsh_agent_command(o, env);
  if (o.ssh_port != 0) argv.insert(argv.end(), {"-p", std::to_string(o.ssh_port)});
  if (!o.ssh_identity_file.empty()) argv.insert(argv.end(), {"-i", o.ssh_identity_file});
  argv.insert(argv.end(), {host, "true"});
  return argv;
}

bool is_this_machine(const std::string& host) {
  if (host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1") return true;
  char name[256] = {0};
  if (gethostname(name, sizeof name - 1) == 0) {
    std::string own = name;
    if (host == own || host == own.substr(0, own.find('.'))) return true;
  }
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool mine = false;
  for (ifaddrs* a = list; a != nullptr && !mine; a = a->ifa_next)
    if (a->ifa_addr != nullptr && (a->ifa_addr->sa_family == AF_INET || a->ifa_addr->sa_family == AF_INET6))
      mine = same_address(a->ifa_addr, host);
  freeifaddrs(list);
  return mine;
}

void check_hosts_reachable(const LaunchPlan& plan, const LaunchOptions& o,
                           std::chrono::seconds timeout) {
  std::vector<std::pair<std::string, pid_t>> running;
  for (const auto& h : plan.hosts)
    if (!is_this_machine(h.host))
      running.emplace_back(h.host, spawn_check(host_check_argv(o, plan.child_env, h.host), plan.child_env));
  std::string failed;
  const auto deadline = Clock::now() + timeout;
  while (!running.empty()) {
    for (auto it = running.begin(); it != running.end();) {
      int status = 0;
      if (waitpid(it->second, &status, WNOHANG) == it->second) {
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
          failed += (failed.empty() ? "" : ", ") + it->first + " (the check failed)";
        it = running.erase(it);
      } else {
        ++it;
      }
    }
    if (running.empty() || Clock::now() < deadline) {
      usleep(20 * 1000);
      continue;
    }
    for (auto& [host, pid] : running) {
      kill(-pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      failed += (failed.empty() ? "" : ", ") + host + " (no answer in " +
                std::to_string(timeout.count()) + " s)";
    }
    running.clear();
  }
  if (!failed.empty())
    throw hvd::Error("--start-timeout: cannot reach " + failed + " with '" +
                     format_command(host_check_argv(o, plan.child_env, "HOST")) + "'");
}

}  // namespace hvd::launcher
