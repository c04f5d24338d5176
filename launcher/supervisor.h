// Runs the launcher (mpirun or srun) from an argv vector and stays with it until it ends:
// relays its stderr (finding the failed rank in it), forwards SIGINT/SIGTERM/SIGHUP once (and
// SIGQUIT, as SIGTERM), and SIGKILLs it and every process below it if it has not exited `grace`
// later. hvdrun becomes a child subreaper first, so ranks orphaned by a dying mpirun are still
// found and ended; the launcher gets SIGTERM if hvdrun itself is killed.
// Runs on hvdrun's main thread; one supervised launch at a time (the elastic driver runs several
// in turn).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "environment.h"
#include "rank_report.h"

namespace hvd::launcher {

struct SupervisorOptions {
  std::chrono::milliseconds grace{3000};
  // Called about every tick_interval while the launcher runs; a non-zero result is a signal to
  // send to the launcher (the elastic driver's "hosts changed" notice).
  std::function<int()> on_tick;
  std::chrono::milliseconds tick_interval{1000};
  // Sees every chunk of the launcher's stderr after it is relayed.
  std::function<void(const char* data, std::size_t size)> on_stderr;
};

struct RunOutcome {
  int exit_code = 0;              // what hvdrun exits with
  int signal_forwarded = 0;       // the first SIGINT/SIGTERM/SIGHUP/SIGQUIT hvdrun received, or 0
  bool killed_after_grace = false;
  int leftovers_killed = 0;       // processes still alive after the launcher exited
  LaunchReport report;            // what the launcher's stderr said about a failure
};

// Throws hvd::Error when the program cannot be found or started.
RunOutcome run_supervised(const std::vector<std::string>& argv, const Environment& env,
                          const SupervisorOptions& options = {});

}  // namespace hvd::launcher
