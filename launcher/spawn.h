// Starting a child process from an argv vector (never through a shell), the one place hvdrun
// forks: the supervised launcher and the --start-timeout host checks both use it. Called on the
// main thread; hvdrun has no other threads, so fork() is safe.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "environment.h"

namespace hvd::launcher {

struct SpawnOptions {
  int stderr_fd = -1;              // >= 0: becomes the child's stderr
  int stdout_fd = -1;              // >= 0: becomes the child's stdout
  bool null_stdin_stdout = false;  // stdin and stdout from/to /dev/null
  bool own_process_group = true;   // the child leads a new process group
  // Non-zero: the child gets this signal when hvdrun dies, even by SIGKILL (PR_SET_PDEATHSIG),
  // so a killed hvdrun does not leave mpirun and the ranks running.
  int parent_death_signal = 0;
};

// Starts `path` with `argv` and `env`. The child has default dispositions for the signals hvdrun
// handles (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD) and an empty signal mask.
// Throws hvd::Error naming the path when it cannot be started.
pid_t spawn_process(const std::string& path, const std::vector<std::string>& argv,
                    const Environment& env, const SpawnOptions& options);

}  // namespace hvd::launcher
