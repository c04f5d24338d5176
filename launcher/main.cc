// hvdrun: parse the command line, build the mpirun (or srun) argv, and run it under supervision.
// Exit codes: the failing rank's (as mpirun reports it), 128+N after signal N, 2 for usage errors.
#include <unistd.h>

#include <sys/resource.h>

#include <fstream>
#include <iostream>

#include "check_build.h"
#include "command.h"
#include "elastic_driver.h"
#include "host_check.h"
#include "horovodcpp/horovod.h"
#include "launch_options.h"
#include "launcher_name.h"
#include "program_path.h"
#include "shell_words.h"
#include "supervisor.h"

extern char** environ;

namespace {

using namespace hvd::launcher;

void print_plan(const LaunchPlan& plan, std::ostream& out) {
  if (!plan.note.empty()) out << launcher_name() << ": " << plan.note << "\n";
  out << launcher_name() << ": command: " << format_command(plan.argv) << "\n";
  if (plan.added.empty()) out << launcher_name() << ": environment added: (none)\n";
  for (const auto& [name, value] : plan.added)
    out << launcher_name() << ": environment added: " << name << "=" << shell_quote(value) << "\n";
}

// Checks that fail before anything starts: the launcher and (when every host is this machine)
// the program exist.
void check_programs(const LaunchPlan& plan, const std::string& program) {
  if (find_program(plan.launcher, plan.child_env).empty()) {
    if (plan.launcher == "srun")
      throw hvd::Error("srun not found in PATH (SLURM_JOB_ID is set, so hvdrun uses srun)");
    throw hvd::Error("mpirun not found in PATH; install Open MPI (e.g. apt-get install "
                     "openmpi-bin) or add its bin directory to PATH");
  }
  // On other hosts the program may live where this machine cannot see: only checked locally.
  if (plan.local && find_program(program, plan.child_env).empty())
    throw hvd::Error("program '" + program + "' " + why_not_runnable(program, plan.child_env));
}

// A local launch this machine cannot start: mpirun, asked for more processes than the kernel
// allows, floods the terminal and hangs. Every rank runs at least 4 threads (main, background,
// watchdog, Open MPI's progress thread), each counted against kernel.threads-max, pid_max and
// the user's process limit (RLIMIT_NPROC).
void check_local_capacity(const LaunchPlan& plan, int np) {
  if (!plan.local || np <= 0) return;
  constexpr long long kThreadsPerRank = 4;
  long long limit = 0;
  std::string source;
  for (const char* name : {"threads-max", "pid_max"}) {  // every thread takes a pid too
    long long value = 0;
    if (std::ifstream in(std::string("/proc/sys/kernel/") + name); in >> value && (source.empty() || value < limit)) {
      limit = value;
      source = std::string("kernel.") + name;
    }
  }
  struct rlimit r;
  if (getrlimit(RLIMIT_NPROC, &r) == 0 && r.rlim_cur != RLIM_INFINITY &&
      (source.empty() || static_cast<long long>(r.rlim_cur) < limit)) {
    limit = static_cast<long long>(r.rlim_cur);
    source = "the process limit, ulimit -u";
  }
  if (source.empty() || np * kThreadsPerRank <= limit) return;
  throw hvd::Error("-np " + std::to_string(np) + " on this machine needs at least " +
                   std::to_string(np * kThreadsPerRank) + " threads (" + std::to_string(kThreadsPerRank) +
                   " per rank) but " + source + " allows " + std::to_string(limit) +
                   "; use fewer ranks or more hosts (-H, --hostfile)");
}

int run(const std::vector<std::string>& args) {
  ParsedCommandLine parsed = parse_command_line(args);
  if (!parsed.help.empty()) {
    std::cout << parsed.help;
    return 0;
  }
  const LaunchOptions& o = parsed.options;
  if (o.version) {
    std::cout << launcher_name() << " (horovodcpp) " << build_info().version << "\n";
    return 0;
  }
  if (o.check_build) {
    std::cout << check_build_report(build_info());
    return 0;
  }
  LaunchContext context{environment_from(environ), geteuid() == 0};
  if (!o.host_discovery_script.empty()) return run_elastic(o, context);
  LaunchPlan plan = build_launch_plan(o, context);
  for (const auto& w : plan.warnings) std::cerr << launcher_name() << ": warning: " << w << "\n";
  if (o.dry_run) {
    print_plan(plan, std::cout);
    return 0;
  }
  check_programs(plan, o.command.front());
  if (plan.launcher == "mpirun") check_local_capacity(plan, o.np);
  if (o.verbose) print_plan(plan, std::cerr);
  if (o.start_timeout > 0 && plan.launcher == "mpirun" && !plan.local)
    check_hosts_reachable(plan, o, std::chrono::seconds(o.start_timeout));
  RunOutcome outcome = run_supervised(plan.argv, plan.child_env);
  if (outcome.exit_code != 0 && outcome.signal_forwarded == 0)
    std::cerr << launcher_name() << ": " << failure_summary(outcome.report, plan.launcher, outcome.exit_code)
              << "\n";
  return outcome.exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  set_launcher_name(argc > 0 ? argv[0] : "");
  try {
    return run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const hvd::Error& e) {
    std::cerr << launcher_name() << ": error: " << e.what() << "\n";
    return kUsageExitCode;
  } catch (const std::exception& e) {
    std::cerr << launcher_name() << ": error: " << e.what() << "\n";
    return kUsageExitCode;
  }
}
