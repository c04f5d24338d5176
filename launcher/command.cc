#include "command.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <sstream>

#include "horovodcpp/horovod.h"
#include "shell_words.h"
#include "this_machine.h"

namespace hvd::launcher {
namespace {

// The hosts and the process count, checked against each other.
void resolve_hosts(const LaunchOptions& o, LaunchPlan* plan, int* np) {
  if (!o.hosts.empty()) plan->hosts = parse_host_list(o.hosts);
  if (!o.hostfile.empty()) plan->hosts = read_hostfile(o.hostfile);
  plan->local = all_on_this_machine(plan->hosts);
  *np = o.np;
  if (plan->hosts.empty()) {
    if (*np < 1) throw hvd::Error("-np is required (or -H/--hostfile to take it from the slots)");
    plan->hosts = {HostSlots{"localhost", *np}};
    return;
  }
  const int slots = total_slots(plan->hosts);
  if (*np == 0) *np = slots;
  if (slots < *np)
    throw hvd::Error("-np " + std::to_string(*np) + " needs " + std::to_string(*np) +
                     " slots but the hosts give " + std::to_string(slots) + " (" +
                     host_list_string(plan->hosts) + ")");
}

void add_mpirun_arguments(const LaunchOptions& o, const LaunchContext& ctx, int np,
                          LaunchPlan* plan) {
  auto& a = plan->argv;
  a = {"mpirun"};
  if (ctx.is_root) a.push_back("--allow-run-as-root");
  a.insert(a.end(), {"-np", std::to_string(np), "-H", host_list_string(plan->hosts)});
  if (o.binding_args.empty())
    a.insert(a.end(), {"-bind-to", "none", "-map-by", "slot"});
  else
    a.insert(a.end(), o.binding_args.begin(), o.binding_args.end());
  a.push_back("--tag-output");
  if (o.timestamp_output) a.push_back("--timestamp-output");
  if (o.tcp_only) a.insert(a.end(), {"-mca", "pml", "ob1", "-mca", "btl", "tcp,self"});
  if (!o.output_filename.empty()) a.insert(a.end(), {"--output-filename", o.output_filename});
  std::string rsh;
  if (o.ssh_port != 0) rsh = "-p " + std::to_string(o.ssh_port);
  if (!o.ssh_identity_file.empty()) rsh += (rsh.empty() ? "-i " : " -i ") + o.ssh_identity_file;
  if (!rsh.empty()) a.insert(a.end(), {"-mca", "plm_rsh_args", rsh});
  if (!o.network_interfaces.empty())
    a.insert(a.end(), {"-mca", "btl_tcp_if_include", o.network_interfaces, "-mca",
                       "oob_tcp_if_include", o.network_interfaces});
  if (o.start_timeout > 0)
    a.insert(a.end(), {"-mca", "orte_startup_timeout", std::to_string(o.start_timeout)});
  for (const auto& name : forwarded_names(ctx.env)) {
    bool knob = false;
    for (const auto& k : plan->added) knob = knob || k.first == name;
    if (!knob) a.insert(a.end(), {"-x", name});
  }
  for (const auto& k : plan->added) a.insert(a.end(), {"-x", k.first});
}

bool inside_slurm(const Environment& env) {
  const char* job = find_env(env, "SLURM_JOB_ID");
  return job != nullptr && *job != '\0';
}

// -np, or the allocation's task count (SLURM_NTASKS) when -np is not given.
int slurm_task_count(const LaunchOptions& o, const Environment& env, std::string* source) {
  if (o.np > 0) return o.np;
  const char* tasks = find_env(env, "SLURM_NTASKS");
  if (tasks == nullptr)
    throw hvd::Error("-np is required: inside Slurm (SLURM_JOB_ID is set) but SLURM_NTASKS is "
                     "not, so the task count is unknown");
  errno = 0;
  char* end = nullptr;
  const long n = std::strtol(tasks, &end, 10);
  if (*tasks == '\0' || *end != '\0' || errno != 0 || n < 1 || n > 1000000)
    throw hvd::Error("SLURM_NTASKS='" + std::string(tasks) + "' is not a whole number >= 1; give -np");
  *source = ", -np " + std::to_string(n) + " from SLURM_NTASKS";
  return static_cast<int>(n);
}

void add_srun_arguments(const LaunchOptions& o, const Environment& env, LaunchPlan* plan) {
  std::string np_source;
  const int np = slurm_task_count(o, env, &np_source);
  plan->launcher = "srun";
  plan->hosts.clear();
  plan->local = false;
  plan->note = "inside a Slurm allocation (SLURM_JOB_ID=" + std::string(find_env(env, "SLURM_JOB_ID")) +
               "): running srun instead of mpirun" + np_source;
  // srun passes the whole environment (--export=ALL is its default), knobs included. With
  // --quit-on-interrupt one forwarded SIGINT ends the step (srun's default only prints status).
  plan->argv = {"srun", "--ntasks=" + std::to_string(np), "--kill-on-bad-exit=1",
                "--quit-on-interrupt", "--label", "--cpu-bind=none"};
  if (!o.output_filename.empty())
    throw hvd::Error("--output-filename is not supported under srun; pass srun's --output "
                     "through --mpi-args");
  if (o.ssh_port != 0 || !o.ssh_identity_file.empty() || !o.network_interfaces.empty() ||
      o.start_timeout > 0 || o.tcp_only || !o.binding_args.empty() || o.timestamp_output)
    plan->warnings.push_back("-p, -i, --network-interfaces, --start-timeout, --tcp, --binding-args and "
                             "-prefix-timestamp are mpirun settings and are ignored under srun");
}

// An interface name such as eth0, not an address or a CIDR subnet.
bool interface_name(const std::string& item) {
  unsigned char address[16];
  return !item.empty() && item.find('/') == std::string::npos &&
         inet_pton(AF_INET, item.c_str(), address) != 1 &&
         inet_pton(AF_INET6, item.c_str(), address) != 1;
}

// NCCL takes interface names only (NCCL_SOCKET_IFNAME), so it is set, as horovodrun does, when
// every item of --network-interfaces is one.
void add_network_environment(const LaunchOptions& o, LaunchPlan* plan) {
  if (o.network_interfaces.empty()) return;
  std::stringstream items(o.network_interfaces);
  for (std::string item; std::getline(items, item, ',');)
    if (!interface_name(item)) return;
  set_env(&plan->added, "NCCL_SOCKET_IFNAME", o.network_interfaces);
}

}  // namespace

LaunchPlan build_launch_plan(const LaunchOptions& o, const LaunchContext& ctx) {
  if (o.command.empty()) throw hvd::Error("missing program to run");
  validate_inherited_knobs(ctx.env, o.knob_env);
  LaunchPlan plan;
  plan.launcher = "mpirun";
  plan.added = o.knob_env;
  plan.warnings = o.notes;
  // As in Horovod, --start-timeout also bounds how long each rank's hvd::init() waits for the others.
  if (o.start_timeout > 0) plan.added.emplace_back("HOROVOD_START_TIMEOUT", std::to_string(o.start_timeout));
  if (inside_slurm(ctx.env) && o.hosts.empty() && o.hostfile.empty()) {
    add_srun_arguments(o, ctx.env, &plan);
  } else {
    int np = 0;
    resolve_hosts(o, &plan, &np);
    add_network_environment(o, &plan);
    add_mpirun_arguments(o, ctx, np, &plan);
  }
  plan.child_env = ctx.env;
  for (const auto& [name, value] : plan.added) set_env(&plan.child_env, name, value);
  for (auto& w : split_shell_words(o.mpi_args, "--mpi-args")) plan.argv.push_back(w);
  plan.argv.insert(plan.argv.end(), o.command.begin(), o.command.end());
  return plan;
}

}  // namespace hvd::launcher
