// hvdrun's elastic mode (--host-discovery-script): it never repairs MPI in place. It launches
// mpirun (or srun) on the hosts discovery offers; when a rank fails it takes that rank's slot out
// (for the --blacklist-cooldown-range cooldown) and relaunches on what is left if --min-np slots
// remain (waiting up to --elastic-timeout for discovery to offer enough); when discovery offers a
// different set of usable hosts it sends the job SIGUSR1, the ranks stop at their next commit
// (exit code hvd::elastic::kHostsChangedExitCode), and it relaunches at the new size up to
// --max-np. The program resumes from its newest commit (horovodcpp/elastic.h). Main thread only.
#pragma once

#include <string>
#include <vector>

#include "command.h"
#include "hosts.h"
#include "launch_options.h"

namespace hvd::launcher {

// The argv and environment of one elastic launch: mpirun on `hosts` (np = their slots), or,
// inside Slurm, srun with --ntasks and --exclude=`excluded` (hosts with a failed slot).
// `job` becomes HOROVOD_ELASTIC_JOB, the name of the ranks' commit store.
LaunchPlan elastic_launch_plan(const LaunchOptions& options, const LaunchContext& context,
                               const std::vector<HostSlots>& hosts,
                               const std::vector<std::string>& excluded, const std::string& job);

// The hosts whose mpirun daemon the launcher lost ("Remote daemon: [[j,0],d] on node HOST" in
// Open MPI's report): a host that died takes its daemon with it, and mpirun may then name no rank.
std::vector<std::string> lost_daemon_hosts(const std::string& launcher_output);

// Runs the job elastically until it succeeds or cannot go on; returns hvdrun's exit code.
int run_elastic(const LaunchOptions& options, const LaunchContext& context);

}  // namespace hvd::launcher
