#include "host_check.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "horovodcpp/horovod.h"
#include "program_path.h"
#include "shell_words.h"
#include "spawn.h"
#include "this_machine.h"

namespace hvd::launcher {
namespace {

using Clock = std::chrono::steady_clock;

// The value of an MCA parameter given in --mpi-args as "-mca NAME VALUE" or "--mca NAME VALUE".
std::string mca_value(const std::string& mpi_args, const std::string& name) {
  auto w = split_shell_words(mpi_args, "--mpi-args");
  for (std::size_t i = 0; i + 2 < w.size(); ++i)
    if ((w[i] == "-mca" || w[i] == "--mca") && w[i + 1] == name) return w[i + 2];
  return {};
}

pid_t spawn_check(const std::vector<std::string>& argv, const Environment& env) {
  const std::string path = find_program(argv[0], env);
  if (path.empty()) throw hvd::Error("--start-timeout: host check agent '" + argv[0] + "' not found in PATH");
  SpawnOptions options;
  options.null_stdin_stdout = true;
  options.own_process_group = true;  // killed as a group on timeout
  options.parent_death_signal = SIGKILL;
  return spawn_process(path, argv, env, options);
}

}  // namespace

std::vector<std::string> rsh_agent_command(const LaunchOptions& o, const Environment& env) {
  std::string agent = mca_value(o.mpi_args, "plm_rsh_agent");
  if (agent.empty()) {
    const char* from_env = find_env(env, "OMPI_MCA_plm_rsh_agent");
    if (from_env != nullptr) agent = from_env;
  }
  agent = agent.substr(0, agent.find(':'));  // "ssh : rsh" means ssh, else rsh
  auto argv = split_shell_words(agent, "plm_rsh_agent");
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
