// Turns LaunchOptions into the exact argv hvdrun runs (mpirun, or srun inside a Slurm
// allocation) and the environment the child gets. No side effects beyond reading a hostfile
// (and asking the system whether a host is this machine), so tests check the argv without
// launching anything. Main thread only.
#pragma once

#include <string>
#include <vector>

#include "environment.h"
#include "hosts.h"
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
  Environment added;              // HOROVOD_* set by knob flags, NCCL_SOCKET_IFNAME set by
                                  // --network-interfaces (also in child_env)
  Environment child_env;          // the launcher's whole environment
  std::vector<HostSlots> hosts;   // empty under srun
  bool local = true;              // every rank on this machine (every host is this machine)
  std::string note;               // why srun was chosen (and where -np came from), or empty
  std::vector<std::string> warnings;
};

// Throws hvd::Error for inconsistent input (slots fewer than np, no -np and no hosts, ...).
// Inside Slurm without -np, the task count comes from SLURM_NTASKS.
LaunchPlan build_launch_plan(const LaunchOptions& options, const LaunchContext& context);

}  // namespace hvd::launcher
