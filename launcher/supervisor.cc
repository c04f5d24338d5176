#include "supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "horovodcpp/horovod.h"
#include "launcher_name.h"
#include "process_tree.h"
#include "program_path.h"
#include "spawn.h"

namespace hvd::launcher {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kDrainAfterExit{1000};
constexpr std::chrono::milliseconds kLeftoverGrace{1000};

void write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    ssize_t n = write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // stderr gone: keep supervising regardless
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

void say(const std::string& message) {
  const std::string line = launcher_name() + ": " + message + "\n";
  write_all(STDERR_FILENO, line.data(), line.size());
}

int poll_timeout_ms(std::optional<Clock::time_point> deadline) {
  if (!deadline) return -1;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now());
  return static_cast<int>(std::max<long long>(0, left.count()) + 1);
}

// The child: its own process group (a terminal's Ctrl-C reaches hvdrun alone, which forwards
// it once), stderr into hvdrun's pipe, and SIGTERM when hvdrun dies (even by SIGKILL).
pid_t spawn(const std::string& path, const std::vector<std::string>& argv, const Environment& env,
            int stderr_fd) {
  SpawnOptions options;
  options.stderr_fd = stderr_fd;
  options.own_process_group = true;
  options.parent_death_signal = SIGTERM;
  return spawn_process(path, argv, env, options);
}

// State of one supervised launch, advanced by the event loop in run_supervised().
struct Watch {
  pid_t pid = -1;
  std::chrono::milliseconds grace{0};
  std::optional<int> status;
  std::optional<Clock::time_point> kill_deadline;
  std::optional<Clock::time_point> drain_deadline;
  std::string name;  // "mpirun" or "srun", for messages
  RunOutcome outcome;
};

const char* signal_name(int signo) {
  switch (signo) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    case SIGQUIT: return "SIGQUIT";
    default: return "a signal";
  }
}

void on_child_signal(Watch& w) {
  int status = 0;
  for (pid_t r; (r = waitpid(-1, &status, WNOHANG)) > 0;) {
    if (r != w.pid) continue;  // an orphan re-parented to us: reaped
    w.status = status;
    w.drain_deadline = Clock::now() + kDrainAfterExit;
  }
}

void on_stop_signal(Watch& w, int signo) {
  if (w.status) return;
  if (w.outcome.signal_forwarded == 0) {
    w.outcome.signal_forwarded = signo;
    // mpirun and srun end their ranks on SIGTERM but dump core on SIGQUIT, leaving ranks behind.
    const int forwarded = signo == SIGQUIT ? SIGTERM : signo;
    say(std::string("received ") + signal_name(signo) + ", forwarding it to " + w.name +
        (forwarded != signo ? std::string(" as ") + signal_name(forwarded) : std::string()));
    kill(w.pid, forwarded);
    w.kill_deadline = Clock::now() + w.grace;
    return;
  }
  say("second signal: killing " + w.name + " and every rank now");
  kill_all_descendants();
  w.outcome.killed_after_grace = true;
  w.kill_deadline.reset();
}

// Copies what the launcher wrote to stderr through to ours, scanning it; closes at EOF.
void relay_stderr(int* pipe_fd, RankReportScanner* scanner, const SupervisorOptions& options) {
  char buffer[8192];
  ssize_t got = read(*pipe_fd, buffer, sizeof buffer);
  if (got > 0) {
    write_all(STDERR_FILENO, buffer, static_cast<std::size_t>(got));
    scanner->feed(buffer, static_cast<std::size_t>(got));
    if (options.on_stderr) options.on_stderr(buffer, static_cast<std::size_t>(got));
  } else if (got == 0 || errno != EINTR) {
    close(*pipe_fd);
    *pipe_fd = -1;
  }
}

void handle_signal(int sfd, Watch& w) {
  signalfd_siginfo info;
  if (read(sfd, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) return;
  if (info.ssi_signo == SIGCHLD) on_child_signal(w);
  else on_stop_signal(w, static_cast<int>(info.ssi_signo));
}

// After a forwarded signal, the launcher has `grace` to exit before its whole tree is killed.
void enforce_grace(Watch& w) {
  if (w.status || !w.kill_deadline || Clock::now() < *w.kill_deadline) return;
  say(w.name + " did not exit within " + std::to_string(w.grace.count()) +
      " ms; killing it and every rank");
  kill_all_descendants();
  w.outcome.killed_after_grace = true;
  w.kill_deadline.reset();
}

void end_leftovers(Watch& w) {
  auto left = descendants_of(getpid());
  if (left.empty()) return;
  w.outcome.leftovers_killed = static_cast<int>(left.size());
  for (pid_t p : left) kill(p, SIGTERM);
  const auto until = Clock::now() + kLeftoverGrace;
  while (Clock::now() < until && reap_children() > 0) usleep(20 * 1000);
  kill_all_descendants();
  for (int i = 0; i < 50 && reap_children() > 0; ++i) usleep(20 * 1000);
  say("ended " + std::to_string(left.size()) + " process(es) left behind by the launcher");
}

int exit_code_of(const Watch& w) {
  if (w.outcome.signal_forwarded != 0) return 128 + w.outcome.signal_forwarded;
  if (WIFEXITED(*w.status)) return WEXITSTATUS(*w.status);
  if (WIFSIGNALED(*w.status)) return 128 + WTERMSIG(*w.status);
  return 1;
}

}  // namespace

RunOutcome run_supervised(const std::vector<std::string>& argv, const Environment& env,
                          const SupervisorOptions& options) {
  const std::string path = argv.empty() ? std::string() : find_program(argv[0], env);
  if (path.empty())
    throw hvd::Error((argv.empty() ? std::string("launcher") : argv[0]) + " not found in PATH");
  become_subreaper();
  signal(SIGPIPE, SIG_IGN);  // a closed stderr must not kill the supervisor
  sigset_t handled, previous;
  sigemptyset(&handled);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) sigaddset(&handled, s);
  sigprocmask(SIG_BLOCK, &handled, &previous);
  const int sfd = signalfd(-1, &handled, SFD_CLOEXEC);
  int pipe_fds[2];
  if (sfd < 0 || pipe2(pipe_fds, O_CLOEXEC) != 0)
    throw hvd::Error(std::string("cannot set up supervision: ") + std::strerror(errno));

  Watch w;
  w.grace = options.grace;
  w.name = argv[0];
  try {
    w.pid = spawn(path, argv, env, pipe_fds[1]);
  } catch (...) {
    for (int fd : {pipe_fds[0], pipe_fds[1], sfd}) close(fd);
    sigprocmask(SIG_SETMASK, &previous, nullptr);
    throw;
  }
  close(pipe_fds[1]);
  int pipe_fd = pipe_fds[0];
  RankReportScanner scanner;
  auto next_tick = Clock::now() + options.tick_interval;
  while (!w.status || (pipe_fd >= 0 && Clock::now() < *w.drain_deadline)) {
    auto deadline = w.status ? w.drain_deadline : w.kill_deadline;
    if (options.on_tick && !w.status && (!deadline || next_tick < *deadline)) deadline = next_tick;
    pollfd fds[2] = {{sfd, POLLIN, 0}, {pipe_fd, POLLIN, 0}};
    int n = poll(fds, pipe_fd >= 0 ? 2 : 1, poll_timeout_ms(deadline));
    if (n < 0 && errno != EINTR) break;
    if (pipe_fd >= 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)))
      relay_stderr(&pipe_fd, &scanner, options);
    if (fds[0].revents & POLLIN) handle_signal(sfd, w);
    enforce_grace(w);
    if (options.on_tick && !w.status && Clock::now() >= next_tick) {
      const int signo = options.on_tick();
      if (signo != 0 && !w.status) kill(w.pid, signo);
      next_tick = Clock::now() + options.tick_interval;
    }
  }
  if (pipe_fd >= 0) close(pipe_fd);
  if (!w.status) {  // poll failed: do not leave anything running
    kill_all_descendants();
    int status = 0;
    waitpid(w.pid, &status, 0);
    w.status = status;
  }
  end_leftovers(w);
  close(sfd);
  sigprocmask(SIG_SETMASK, &previous, nullptr);
  w.outcome.report = scanner.report();
  w.outcome.exit_code = exit_code_of(w);
  return w.outcome;
}

}  // namespace hvd::launcher
