#include "launch_options.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>

#include "horovodcpp/horovod.h"
#include "horovodrun_flags.h"
#include "hosts.h"
#include "launcher_name.h"
#include "shell_words.h"

namespace hvd::launcher {
namespace {

constexpr const char* kDescription =
    "runs a horovodcpp program on N processes through Open MPI's mpirun (srun inside a "
    "Slurm allocation). Everything from PROGRAM on goes to every rank unchanged.";
constexpr const char* kFooter =
    "Examples:\n  hvdrun -np 4 ./train\n  hvdrun -np 8 -H node1:4,node2:4 --fusion-threshold-mb 64 "
    "./train --epochs 5\n  hvdrun -np 2 --dry-run ./train      (print the command, run nothing)";

// Numeric flags as typed; converted by whole_number() so a bad value gets hvdrun's message.
struct NumberTexts {
  std::string np, ssh_port, start_timeout;
  std::string min_np, max_np, slots_per_host, reset_limit, cooldown_range, elastic_timeout;
};

// horovodrun's single-dash names of more than one letter, which CLI11 cannot declare.
const std::map<std::string, std::string>& single_dash_long_names() {
  static const std::map<std::string, std::string> kNames = {
      {"-np", "--num-proc"},
      {"-cb", "--check-build"},
      {"-hostfile", "--hostfile"},
      {"-prefix-timestamp", "--prefix-output-with-timestamp"}};
  return kNames;
}

void add_launch_flags(CLI::App& app, LaunchOptions& o, NumberTexts& numbers) {
  const char* hosts = "Hosts and processes";
  app.add_option("--num-proc", numbers.np, "Number of processes (also -np).")
      ->type_name("N")->group(hosts);
  app.add_option("-H,--hosts", o.hosts, "Hosts and slots: host1:2,host2:4 (default localhost:N).")
      ->type_name("HOSTS")->group(hosts);
  app.add_option("--hostfile", o.hostfile, "File with one 'HOST slots=N' per line; # comments.")
      ->type_name("FILE")->group(hosts);
  app.add_option("-p,--ssh-port", numbers.ssh_port, "SSH port on the hosts.")
      ->type_name("PORT")->group(hosts);
  app.add_option("-i,--ssh-identity-file", o.ssh_identity_file,
                 "SSH identity (private key) file; its path may not contain whitespace.")
      ->type_name("FILE")->group(hosts);
  app.add_option("--network-interfaces,--network-interface", o.network_interfaces,
                 "Interfaces or subnets for MPI traffic, e.g. eth0 or 10.0.0.0/24 (comma-separated).")
      ->type_name("LIST")->group(hosts);
  app.add_option("--start-timeout", numbers.start_timeout,
                 "Before launching, every other host must answer mpirun's ssh/rsh agent within "
                 "this many seconds (also sets Open MPI's orte_startup_timeout), and every rank's "
                 "hvd::init() fails naming the ranks that did not reach it in this time "
                 "(sets HOROVOD_START_TIMEOUT).")
      ->type_name("SECONDS")->group(hosts);
  const char* run = "Launch";
  app.add_option("--output-filename", o.output_filename,
                 "Write each rank's output under this directory (mpirun --output-filename).")
      ->type_name("DIR")->group(run);
  app.add_option("--mpi-args", o.mpi_args,
                 "Extra arguments for mpirun (or srun), split into words as a shell would "
                 "(quotes and backslashes; no expansion).")
      ->type_name("\"ARGS\"")->group(run);
  app.add_flag("--verbose", o.verbose, "Print the command before running it.")->group(run);
  app.add_flag("--dry-run", o.dry_run, "Print the command and the environment it adds, then exit.")
      ->group(run);
  app.add_flag("--check-build", o.check_build, "List what this build contains and exit (also -cb).")
      ->group(run);
  app.add_flag("-v,--version", o.version, "Print the version and exit.")->group(run);
}

// Horovod's elastic flags; see docs/elastic.md.
void add_elastic_flags(CLI::App& app, LaunchOptions& o, NumberTexts& numbers) {
  const char* elastic = "Elastic training (docs/elastic.md)";
  app.add_option("--host-discovery-script", o.host_discovery_script,
                 "Run elastically: this command prints the usable hosts, one HOST or HOST:SLOTS "
                 "per line; hvdrun runs it before each launch and every second while the job runs.")
      ->type_name("COMMAND")->group(elastic);
  app.add_option("--min-np,--min-num-proc", numbers.min_np,
                 "Fewest processes to train with (default -np); fewer slots: wait up to "
                 "--elastic-timeout, then fail.")
      ->type_name("N")->group(elastic);
  app.add_option("--max-np,--max-num-proc", numbers.max_np, "Most processes to grow to (default: no limit).")
      ->type_name("N")->group(elastic);
  app.add_option("--slots-per-host", numbers.slots_per_host,
                 "Slots of a host the discovery script prints without :SLOTS (default 1).")
      ->type_name("N")->group(elastic);
  app.add_option("--reset-limit", numbers.reset_limit,
                 "Most relaunches (after a failure or a change of hosts) before giving up "
                 "(default: no limit).")
      ->type_name("N")->group(elastic);
  app.add_option("--blacklist-cooldown-range", numbers.cooldown_range,
                 "A failed rank's slot stays out MIN seconds, doubling with each failure on its "
                 "host up to MAX (default: for good). Two words: MIN MAX.")
      ->type_name("MIN MAX")->group(elastic);
  app.add_option("--elastic-timeout", numbers.elastic_timeout,
                 "Seconds to wait for --min-np slots before failing (default 600).")
      ->type_name("SECONDS")->group(elastic);
}

// The program begins at the first word that is neither a flag nor a flag's value; `--` also
// ends hvdrun's flags. CLI11 cannot name a flag "-np" or "-cb", so they are rewritten to their
// long names here, and values are attached (--name=value) so a value such as "-1" is never read
// as a flag. An empty value is refused here (CLI11 would take the next word instead), except
// for --mpi-args, where it adds nothing.
void split_arguments(CLI::App& app, const std::vector<std::string>& args,
                     std::vector<std::string>* ours, std::vector<std::string>* command) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& tok = args[i];
    if (tok == "--") {
      command->assign(args.begin() + i + 1, args.end());
      return;
    }
    if (tok.size() < 2 || tok[0] != '-') {
      command->assign(args.begin() + i, args.end());
      return;
    }
    std::string name, value;
    bool attached = false;
    const auto& long_names = single_dash_long_names();
    if (tok.rfind("--", 0) == 0 || long_names.count(tok.substr(0, tok.find('='))) != 0) {
      auto eq = tok.find('=');
      name = tok.substr(0, eq);
      attached = eq != std::string::npos;
      if (attached) value = tok.substr(eq + 1);
      if (long_names.count(name) != 0) name = long_names.at(name);
    } else {
      name = tok.substr(0, 2);
      attached = tok.size() > 2;
      if (attached) value = tok.substr(2);
    }
    CLI::Option* opt = app.get_option_no_throw(name);
    if (opt == nullptr) throw hvd::Error("unknown flag '" + tok + "' (see " + launcher_name() + " --help)");
    if (opt->get_items_expected_max() == 0) {
      if (attached) throw hvd::Error("flag " + name + " takes no value (got '" + tok + "')");
      ours->push_back(name);
      continue;
    }
    if (!attached) {
      if (i + 1 >= args.size()) throw hvd::Error("flag " + tok + " needs a value");
      value = args[++i];
      // Horovod's --blacklist-cooldown-range MIN MAX takes two words.
      if (opt->check_lname("blacklist-cooldown-range")) {
        if (i + 1 >= args.size()) throw hvd::Error("flag " + tok + " needs two values: MIN MAX");
        value += " " + args[++i];
      }
    }
    if (value.empty()) {
      if (opt->check_lname("hosts")) parse_host_list(value);  // throws: empty host list
      if (opt->check_lname("mpi-args")) continue;
      throw hvd::Error("flag " + tok.substr(0, tok.find('=')) + " needs a non-empty value");
    }
    ours->push_back("--" + opt->get_lnames().front() + "=" + value);
  }
}

// `text` as a whole number in [min, max], else hvd::Error "FLAG 'TEXT': expected EXPECTED".
int whole_number(const std::string& flag, const std::string& text, long min, long max,
                 const std::string& expected) {
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  const bool digits = !text.empty() && text.find_first_not_of("+-0123456789") == std::string::npos;
  if (!digits || *end != '\0' || errno != 0 || v < min || v > max)
    throw hvd::Error(flag + " '" + text + "': expected " + expected);
  return static_cast<int>(v);
}

void convert_numbers(const CLI::App& app, const NumberTexts& n, LaunchOptions& o) {
  if (app.count("--num-proc"))
    o.np = whole_number("-np", n.np, 1, 1000000, "a whole number >= 1");
  if (app.count("--ssh-port"))
    o.ssh_port = whole_number("-p/--ssh-port", n.ssh_port, 1, 65535, "a port number 1..65535");
  if (app.count("--start-timeout"))
    o.start_timeout = whole_number("--start-timeout", n.start_timeout, 1, 1000000,
                                   "a whole number of seconds >= 1");
  const char* count = "a whole number >= 1";
  if (app.count("--min-np")) o.min_np = whole_number("--min-np", n.min_np, 1, 1000000, count);
  if (app.count("--max-np")) o.max_np = whole_number("--max-np", n.max_np, 1, 1000000, count);
  if (app.count("--slots-per-host"))
    o.slots_per_host = whole_number("--slots-per-host", n.slots_per_host, 1, 1000000, count);
  if (app.count("--reset-limit"))
    o.reset_limit = whole_number("--reset-limit", n.reset_limit, 0, 1000000, "a whole number >= 0");
  if (app.count("--elastic-timeout"))
    o.elastic_timeout = whole_number("--elastic-timeout", n.elastic_timeout, 1, 1000000,
                                     "a whole number of seconds >= 1");
  if (app.count("--blacklist-cooldown-range")) {
    const auto words = split_shell_words(n.cooldown_range, "--blacklist-cooldown-range");
    const std::string expected = "two whole numbers of seconds MIN MAX with 1 <= MIN <= MAX";
    if (words.size() != 2)
      throw hvd::Error("--blacklist-cooldown-range '" + n.cooldown_range + "': expected " + expected);
    o.cooldown_min = whole_number("--blacklist-cooldown-range MIN", words[0], 1, 1000000, expected);
    o.cooldown_max = whole_number("--blacklist-cooldown-range MAX", words[1], 1, 1000000, expected);
    if (o.cooldown_min > o.cooldown_max)
      throw hvd::Error("--blacklist-cooldown-range " + words[0] + " " + words[1] +
                       ": MIN is greater than MAX");
  }
}

void check_elastic_values(const CLI::App& app, const LaunchOptions& o) {
  const bool elastic = !o.host_discovery_script.empty();
  if (!elastic) {
    for (const char* flag : {"--min-np", "--max-np", "--slots-per-host", "--reset-limit",
                             "--blacklist-cooldown-range", "--elastic-timeout"})
      if (app.count(flag))
        throw hvd::Error(std::string(flag) + " needs --host-discovery-script (elastic mode)");
    return;
  }
  if (!o.hosts.empty() || !o.hostfile.empty())
    throw hvd::Error("--host-discovery-script replaces -H/--hosts and --hostfile; give one of them");
  if (o.np == 0 && o.min_np == 0)
    throw hvd::Error("elastic mode needs -np or --min-np (the fewest processes to train with)");
  const int min_np = o.min_np > 0 ? o.min_np : o.np;
  if (o.max_np > 0 && min_np > o.max_np)
    throw hvd::Error("--min-np " + std::to_string(min_np) + (o.min_np > 0 ? "" : " (from -np)") +
                     " is greater than --max-np " + std::to_string(o.max_np));
  if (o.max_np > 0 && o.np > o.max_np)
    throw hvd::Error("-np " + std::to_string(o.np) + " is greater than --max-np " +
                     std::to_string(o.max_np));
}

void check_values(const CLI::App& app, const LaunchOptions& o) {
  if (!o.hosts.empty() && !o.hostfile.empty())
    throw hvd::Error("give either -H/--hosts or --hostfile, not both");
  // Open MPI splits plm_rsh_args on whitespace, so such a path would reach ssh as two words.
  if (o.ssh_identity_file.find_first_of(" \t\n") != std::string::npos)
    throw hvd::Error("-i/--ssh-identity-file '" + o.ssh_identity_file + "': the path contains "
                     "whitespace, which Open MPI's plm_rsh_args would split; use a path without "
                     "spaces (e.g. a symlink to the key)");
  split_shell_words(o.mpi_args, "--mpi-args");  // throws for unbalanced quotes
  if (app.count("--network-interfaces") && o.network_interfaces.empty())
    throw hvd::Error("--network-interfaces needs at least one interface or subnet");
  if (o.command.empty() && !o.version && !o.check_build)
    throw hvd::Error("missing program to run. Usage: " + launcher_name() + " -np N PROGRAM [ARGS...]");
}

}  // namespace

ParsedCommandLine parse_command_line(const std::vector<std::string>& args) {
  ParsedCommandLine result;
  LaunchOptions& o = result.options;
  CLI::App app{launcher_name() + ": " + kDescription, launcher_name()};
  app.footer(unflagged_knobs_help() + "\n\n" + kFooter);
  // The usage line reads "Usage: <name> [-np N FLAGS...] PROGRAM [ARGS...]".
  app.get_formatter()->label("OPTIONS", "-np N FLAGS...] PROGRAM [ARGS...");
  NumberTexts numbers;
  add_launch_flags(app, o, numbers);
  add_elastic_flags(app, o, numbers);
  KnobFlags knobs;
  knobs.add_to(app);
  HorovodrunFlags horovodrun;
  horovodrun.add_to(app);

  std::vector<std::string> ours;
  split_arguments(app, args, &ours, &o.command);
  std::reverse(ours.begin(), ours.end());  // CLI11 takes a vector in reverse order
  try {
    app.parse(ours);
  } catch (const CLI::CallForHelp&) {
    result.help = app.help();
    return result;
  } catch (const CLI::ParseError& e) {
    throw hvd::Error(e.what());
  }
  convert_numbers(app, numbers, o);
  o.knob_env = knobs.environment();
  horovodrun.apply(o);
  check_values(app, o);
  check_elastic_values(app, o);
  return result;
}

}  // namespace hvd::launcher
