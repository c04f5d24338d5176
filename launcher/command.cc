#include "command.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <sstream>

#include "horovodcpp/horovod.h"

namespace hvd::launcher {
namespace {

bool plain_name(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '_';
  });
}

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// The hosts and the process count, checked against each other.
void resolve_hosts(const LaunchOptions& o, LaunchPlan* plan, int* np) {
  if (!o.hosts.empty()) plan->hosts = parse_host_list(o.hosts);
  if (!o.hostfile.empty()) plan->hosts = read_hostfile(o.hostfile);
  plan->local = plan->hosts.empty();
  *np = o.np;
  if (plan->local) {
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
  a.insert(a.end(), {"-np", std::to_string(np), "-H", host_list_string(plan->hosts), "-bind-to",
                     "none", "-map-by", "slot", "--tag-output"});
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

void add_srun_arguments(const LaunchOptions& o, int np, LaunchPlan* plan) {
  plan->launcher = "srun";
  plan->hosts.clear();
  plan->local = false;
  plan->note = "inside a Slurm allocation (SLURM_JOB_ID=" + std::string(find_env(plan->child_env,
               "SLURM_JOB_ID")) + "): running srun instead of mpirun";
  // srun passes the whole environment (--export=ALL is its default), knobs included.
  plan->argv = {"srun", "--ntasks=" + std::to_string(np), "--kill-on-bad-exit=1", "--label",
                "--cpu-bind=none"};
  if (!o.output_filename.empty())
    throw hvd::Error("--output-filename is not supported under srun; pass srun's --output "
                     "through --mpi-args");
  if (o.ssh_port != 0 || !o.ssh_identity_file.empty() || !o.network_interfaces.empty() ||
      o.start_timeout > 0)
    plan->warnings.push_back("-p, -i, --network-interfaces and --start-timeout are mpirun "
                             "settings and are ignored under srun");
}

}  // namespace

Environment environment_from(char** envp) {
  Environment env;
  for (char** e = envp; e != nullptr && *e != nullptr; ++e) {
    std::string entry = *e;
    auto eq = entry.find('=');
    if (eq == std::string::npos) continue;
    env.emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

const char* find_env(const Environment& env, const std::string& name) {
  for (const auto& [k, v] : env)
    if (k == name) return v.c_str();
  return nullptr;
}

std::vector<std::string> forwarded_names(const Environment& env) {
  std::vector<std::string> names;
  for (const auto& kv : env) {
    const std::string& name = kv.first;
    if (!plain_name(name) || name == "_" || name == "CUDA_VISIBLE_DEVICES" || name.rfind("BASH_FUNC_", 0) == 0)
      continue;
    names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

LaunchPlan build_launch_plan(const LaunchOptions& o, const LaunchContext& ctx) {
  if (o.command.empty()) throw hvd::Error("missing program to run");
  validate_inherited_knobs(ctx.env, o.knob_env);
  LaunchPlan plan;
  plan.launcher = "mpirun";
  plan.added = o.knob_env;
  plan.child_env = ctx.env;
  for (const auto& [name, value] : plan.added) {
    auto it = std::find_if(plan.child_env.begin(), plan.child_env.end(),
                           [&](const auto& kv) { return kv.first == name; });
    if (it != plan.child_env.end()) it->second = value;
    else plan.child_env.emplace_back(name, value);
  }
  int np = 0;
  resolve_hosts(o, &plan, &np);
  const char* slurm_job = find_env(ctx.env, "SLURM_JOB_ID");
  if (slurm_job != nullptr && *slurm_job != '\0' && o.hosts.empty() && o.hostfile.empty())
    add_srun_arguments(o, np, &plan);
  else
    add_mpirun_arguments(o, ctx, np, &plan);
  for (auto& w : split_words(o.mpi_args)) plan.argv.push_back(w);
  plan.argv.insert(plan.argv.end(), o.command.begin(), o.command.end());
  return plan;
}

std::string shell_quote(const std::string& arg) {
  const bool safe = !arg.empty() && std::all_of(arg.begin(), arg.end(), [](unsigned char c) {
    return std::isalnum(c) || std::string("@%_+=:,./-").find(static_cast<char>(c)) !=
                                  std::string::npos;
  });
  if (safe) return arg;
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string format_command(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) out += (out.empty() ? "" : " ") + shell_quote(a);
  return out;
}

std::string find_program(const std::string& program, const Environment& env) {
  if (program.empty()) return {};
  if (program.find('/') != std::string::npos)
    return access(program.c_str(), X_OK) == 0 ? program : std::string();
  const char* path = find_env(env, "PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    std::string full = (dir.empty() ? "." : dir) + "/" + program;
    if (access(full.c_str(), X_OK) == 0) return full;
  }
  return {};
}

}  // namespace hvd::launcher
