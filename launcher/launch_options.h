// hvdrun's command line (horovodrun's flag names) parsed into LaunchOptions. Everything up to
// the program is hvdrun's; the program and everything after it go to the ranks unchanged.
// Used on the main thread only.
#pragma once

#include <string>
#include <vector>

#include "knobs.h"

namespace hvd::launcher {

// Usage errors (exit code 2 from hvdrun).
constexpr int kUsageExitCode = 2;

struct LaunchOptions {
  int np = 0;  // 0: not given (then the total slots of -H/--hostfile, or SLURM_NTASKS under srun)
  std::string hosts;
  std::string hostfile;
  int ssh_port = 0;
  std::string ssh_identity_file;
  std::string network_interfaces;
  std::string output_filename;
  std::string mpi_args;
  int start_timeout = 0;  // seconds; 0: Open MPI's default (no limit)
  bool verbose = false;
  bool check_build = false;
  bool version = false;
  bool dry_run = false;
  // Elastic mode (on when host_discovery_script is given); see elastic_driver.h.
  std::string host_discovery_script;
  int min_np = 0;          // 0: not given (then -np)
  int max_np = 0;          // 0: not given (no limit)
  int slots_per_host = 1;  // for discovery lines without :SLOTS
  int reset_limit = -1;    // relaunches allowed; -1: no limit
  int cooldown_min = 0, cooldown_max = 0;  // --blacklist-cooldown-range; 0 0: failed slots stay out
  int elastic_timeout = 600;               // seconds to wait for --min-np slots
  Environment knob_env;              // HOROVOD_* from knob flags, validated, table order
  // horovodrun's other flags (horovodrun_flags.h):
  std::vector<std::string> binding_args;  // --binding-args, in words: replaces -bind-to none -map-by slot
  bool tcp_only = false;                  // --tcp: -mca pml ob1 -mca btl tcp,self
  bool timestamp_output = false;          // -prefix-timestamp: mpirun --timestamp-output
  std::vector<std::string> notes;         // flags accepted that change nothing, and why (warnings)
  std::vector<std::string> command;  // program and its arguments
};

struct ParsedCommandLine {
  LaunchOptions options;
  std::string help;  // non-empty: --help was asked for; print it and exit 0
};

// `args` excludes argv[0]. Throws hvd::Error with a message naming the bad flag or value.
ParsedCommandLine parse_command_line(const std::vector<std::string>& args);

}  // namespace hvd::launcher
