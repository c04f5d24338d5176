// Turns LaunchOptions into the exact argv hvdrun runs (mpirun, or srun inside a Slurm
// allocation) and the environment the child gets. No side effects beyond reading a hostfile,
// so tests check the argv without launching anything.
#pragma once

#include <string>
#include <vector>

#include "hosts.h"
#include "knobs.h"
#include "launch_options.h"

namespace hvd::launcher {

// What hvdrun knows about where it runs; main() fills it from the real process.
struct LaunchContext {
  Environment env;  // hvdrun's environment, in order
  bool is_root = false;
};

struct LaunchPlan {
  std::string launcher;           // "mpirun" or "srun"
  std::vector<std::string> argv;  // argv[0] is the launcher, found through PATH
  Environment added;              // HOROVOD_* set by knob flags (also in child_env)
  Environment child_env;          // the launcher's whole environment
  std::vector<HostSlots> hosts;   // empty under srun
  bool local = true;              // every rank on this machine (localhost)
  std::string note;               // why srun was chosen, or empty
  std::vector<std::string> warnings;
};

Environment environment_from(char** envp);
const char* find_env(const Environment& env, const std::string& name);

// Names passed to mpirun with -x: every variable with a plain name, less CUDA_VISIBLE_DEVICES
// (each host keeps its own) and exported shell functions (BASH_FUNC_*), sorted.
std::vector<std::string> forwarded_names(const Environment& env);

// Throws hvd::Error for inconsistent input (slots fewer than np, no -np and no hosts, ...).
LaunchPlan build_launch_plan(const LaunchOptions& options, const LaunchContext& context);

// For --dry-run and --verbose only: the argv quoted as a POSIX shell would need it.
std::string shell_quote(const std::string& arg);
std::string format_command(const std::vector<std::string>& argv);

// The full path of `program` (as execvp would find it through PATH), or "" when not found.
std::string find_program(const std::string& program, const Environment& env);

}  // namespace hvd::launcher
