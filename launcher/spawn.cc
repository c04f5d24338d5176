#include "spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "horovodcpp/horovod.h"

namespace hvd::launcher {
namespace {

// Only async-signal-safe calls between fork() and execve(); on failure the errno goes to the
// parent through `report_fd` (closed on a successful exec).
[[noreturn]] void exec_child(const char* path, char* const* argv, char* const* envp,
                             const SpawnOptions& o, pid_t parent, int report_fd) {
  int failure = 0;
  if (o.parent_death_signal != 0 && (prctl(PR_SET_PDEATHSIG, o.parent_death_signal) != 0 ||
                                     getppid() != parent))
    _exit(127);  // hvdrun is already gone: do not start a job nobody supervises
  struct sigaction defaults;
  std::memset(&defaults, 0, sizeof defaults);
  defaults.sa_handler = SIG_DFL;
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD}) sigaction(s, &defaults, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  if (o.own_process_group && setpgid(0, 0) != 0) failure = errno;
  if (failure == 0 && o.stderr_fd >= 0 && dup2(o.stderr_fd, STDERR_FILENO) < 0) failure = errno;
  if (failure == 0 && o.stdout_fd >= 0 && dup2(o.stdout_fd, STDOUT_FILENO) < 0) failure = errno;
  if (failure == 0 && o.null_stdin_stdout) {
    int in = open("/dev/null", O_RDONLY), out = open("/dev/null", O_WRONLY);
    if (in < 0 || out < 0 || dup2(in, STDIN_FILENO) < 0 || dup2(out, STDOUT_FILENO) < 0)
      failure = errno;
    for (int fd : {in, out})
      if (fd > STDERR_FILENO) close(fd);
  }
  if (failure == 0) {
    execve(path, argv, envp);
    failure = errno;
  }
  (void)!write(report_fd, &failure, sizeof failure);
  _exit(127);
}

}  // namespace

pid_t spawn_process(const std::string& path, const std::vector<std::string>& argv,
                    const Environment& env, const SpawnOptions& options) {
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> c_argv, c_env;
  for (const auto& a : argv) c_argv.push_back(const_cast<char*>(a.c_str()));
  for (const auto& e : env_strings) c_env.push_back(const_cast<char*>(e.c_str()));
  c_argv.push_back(nullptr);
  c_env.push_back(nullptr);

  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0)
    throw hvd::Error("cannot start " + path + ": " + std::strerror(errno));
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) exec_child(path.c_str(), c_argv.data(), c_env.data(), options, parent, report[1]);
  const int fork_error = errno;
  close(report[1]);
  int child_error = 0;
  ssize_t got = 0;
  if (pid > 0) {
    do got = read(report[0], &child_error, sizeof child_error);
    while (got < 0 && errno == EINTR);
  }
  close(report[0]);
  if (pid < 0) throw hvd::Error("cannot start " + path + ": " + std::strerror(fork_error));
  if (got == static_cast<ssize_t>(sizeof child_error)) {
    waitpid(pid, nullptr, 0);
    throw hvd::Error("cannot start " + path + ": " + std::strerror(child_error));
  }
  return pid;
}

}  // namespace hvd::launcher
