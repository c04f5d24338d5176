// --start-timeout, the part hvdrun does itself: before mpirun starts, every remote host must
// answer `AGENT [plm_rsh_args] HOST true` (the same agent and arguments mpirun will use to
// start its daemons) within the timeout, all hosts in parallel, as horovodrun checks ssh.
// Called on the main thread before the launch.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "command.h"

namespace hvd::launcher {

// The agent mpirun will use: plm_rsh_agent from --mpi-args, else OMPI_MCA_plm_rsh_agent, else
// ssh (with BatchMode, so a password prompt fails instead of waiting).
std::vector<std::string> rsh_agent_command(const LaunchOptions& options, const Environment& env);

// The argv that checks one host.
std::vector<std::string> host_check_argv(const LaunchOptions& options, const Environment& env,
                                         const std::string& host);

// Throws hvd::Error naming every host that failed or did not answer within `timeout`. Hosts
// that are this machine are not checked (mpirun starts those ranks itself).
void check_hosts_reachable(const LaunchPlan& plan, const LaunchOptions& options,
                           std::chrono::seconds timeout);

}  // namespace hvd::launcher
