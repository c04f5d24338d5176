// The exact argv hvdrun runs for each flag, the environment it adds, and srun under Slurm.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>

#include "command.h"
#include "core/settings.h"
#include "horovodcpp/horovod.h"
#include "host_check.h"
#include "program_path.h"
#include "shell_words.h"
#include "this_machine.h"

using namespace hvd::launcher;
using Args = std::vector<std::string>;

namespace {

const Environment kEnv = {{"PATH", "/usr/bin:/bin"},
                          {"HOME", "/root"},
                          {"CUDA_VISIBLE_DEVICES", "0,1"},
                          {"BASH_FUNC_module%%", "() { echo hi; }"},
                          {"_", "/usr/bin/hvdrun"},
                          {"LANG", "C.UTF-8"}};
// What every local launch as root starts with, then what every launch ends with.
const Args kRootLocal4 = {"mpirun", "--allow-run-as-root", "-np", "4", "-H", "localhost:4",
                          "-bind-to", "none", "-map-by", "slot", "--tag-output"};
const Args kForwarded = {"-x", "HOME", "-x", "LANG", "-x", "PATH"};

LaunchPlan plan_for(const Args& args, Environment env = kEnv, bool root = true) {
  return build_launch_plan(parse_command_line(args).options, LaunchContext{env, root});
}

Args concat(std::initializer_list<Args> parts) {
  Args out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

std::string plan_error(const Args& args, Environment env = kEnv) {
  try {
    plan_for(args, env);
  } catch (const hvd::Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("local launch: -H localhost:N, binding, tags, forwarded environment") {
  auto plan = plan_for({"-np", "4", "prog", "a b", "it's;rm -rf x", "$HOME"});
  CHECK(plan.launcher == "mpirun");
  CHECK(plan.local);
  CHECK(plan.argv == concat({kRootLocal4, kForwarded, {"prog", "a b", "it's;rm -rf x", "$HOME"}}));
  CHECK(plan.added.empty());
  CHECK(plan.child_env == kEnv);
}

TEST_CASE("--allow-run-as-root only as root") {
  auto plan = plan_for({"-np", "2", "prog"}, kEnv, false);
  CHECK(plan.argv == concat({{"mpirun", "-np", "2", "-H", "localhost:2", "-bind-to", "none",
                              "-map-by", "slot", "--tag-output"},
                             kForwarded, {"prog"}}));
}

TEST_CASE("mpirun flags: output, ssh, interfaces, start timeout, --mpi-args") {
  CHECK(plan_for({"-np", "4", "--output-filename", "/tmp/o", "prog"}).argv ==
        concat({kRootLocal4, {"--output-filename", "/tmp/o"}, kForwarded, {"prog"}}));
  CHECK(plan_for({"-np", "4", "-p", "2222", "prog"}).argv ==
        concat({kRootLocal4, {"-mca", "plm_rsh_args", "-p 2222"}, kForwarded, {"prog"}}));
  CHECK(plan_for({"-np", "4", "-i", "/k/id_rsa", "prog"}).argv ==
        concat({kRootLocal4, {"-mca", "plm_rsh_args", "-i /k/id_rsa"}, kForwarded, {"prog"}}));
  CHECK(plan_for({"-np", "4", "-p", "22", "-i", "/k/id", "prog"}).argv ==
        concat({kRootLocal4, {"-mca", "plm_rsh_args", "-p 22 -i /k/id"}, kForwarded, {"prog"}}));
  // Subnets (or a mix): MPI only; NCCL takes interface names, so NCCL_SOCKET_IFNAME stays unset.
  auto mixed = plan_for({"-np", "4", "--network-interfaces", "eth1,10.1.0.0/16", "prog"});
  CHECK(mixed.argv == concat({kRootLocal4,
                              {"-mca", "btl_tcp_if_include", "eth1,10.1.0.0/16", "-mca",
                               "oob_tcp_if_include", "eth1,10.1.0.0/16"},
                              kForwarded, {"prog"}}));
  CHECK(mixed.added.empty());
  CHECK(find_env(mixed.child_env, "NCCL_SOCKET_IFNAME") == nullptr);
  // --start-timeout also bounds each rank's hvd::init() (HOROVOD_START_TIMEOUT), as in Horovod.
  auto timed = plan_for({"-np", "4", "--start-timeout", "45", "prog"});
  CHECK(timed.argv == concat({kRootLocal4, {"-mca", "orte_startup_timeout", "45"}, kForwarded,
                              {"-x", "HOROVOD_START_TIMEOUT", "prog"}}));
  CHECK(timed.added == Environment{{"HOROVOD_START_TIMEOUT", "45"}});
  CHECK(plan_for({"-np", "4", "--mpi-args", "  --mca btl tcp,self\t-report-bindings ", "prog"}).argv ==
        concat({kRootLocal4, kForwarded, {"--mca", "btl", "tcp,self", "-report-bindings", "prog"}}));
}

TEST_CASE("--network-interfaces with interface names also sets NCCL_SOCKET_IFNAME, as horovodrun") {
  Environment env = kEnv;
  env.emplace_back("NCCL_SOCKET_IFNAME", "lo");  // the flag wins over the inherited value
  auto plan = plan_for({"-np", "4", "--network-interfaces", "eth1,ib0", "prog"}, env);
  CHECK(plan.argv == concat({kRootLocal4,
                             {"-mca", "btl_tcp_if_include", "eth1,ib0", "-mca",
                              "oob_tcp_if_include", "eth1,ib0"},
                             kForwarded, {"-x", "NCCL_SOCKET_IFNAME", "prog"}}));
  CHECK(plan.added == Environment{{"NCCL_SOCKET_IFNAME", "eth1,ib0"}});
  CHECK(std::string(find_env(plan.child_env, "NCCL_SOCKET_IFNAME")) == "eth1,ib0");
  for (const char* not_names : {"10.0.0.0/24", "10.0.0.5", "fe80::1"})
    CHECK(plan_for({"-np", "1", "--network-interfaces", not_names, "p"}).added.empty());
}

TEST_CASE("every knob flag: the exact argv and the variable it adds") {
  struct Case {
    Args flag;
    std::string env, value;
  };
  const std::vector<Case> cases = {
      {{"--fusion-threshold-mb", "32"}, "HOROVOD_FUSION_THRESHOLD", "33554432"},
      {{"--cycle-time-ms", "2.5"}, "HOROVOD_CYCLE_TIME", "2.5"},
      {{"--cache-capacity", "7"}, "HOROVOD_CACHE_CAPACITY", "7"},
      {{"--timeline-filename", "/tmp/t l.json"}, "HOROVOD_TIMELINE", "/tmp/t l.json"},
      {{"--timeline-mark-cycles"}, "HOROVOD_TIMELINE_MARK_CYCLES", "1"},
      {{"--timeline-all-ranks"}, "HOROVOD_TIMELINE_ALL_RANKS", "1"},
      {{"--no-stall-check"}, "HOROVOD_STALL_CHECK_DISABLE", "1"},
      {{"--stall-check-warning-time-seconds", "30"}, "HOROVOD_STALL_CHECK_TIME_SECONDS", "30"},
      {{"--stall-check-shutdown-time-seconds", "90"}, "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "90"},
      {{"--liveness-timeout-seconds", "600"}, "HOROVOD_LIVENESS_TIMEOUT_SECONDS", "600"},
      {{"--hierarchical-allreduce"}, "HOROVOD_HIERARCHICAL_ALLREDUCE", "1"},
      {{"--autotune"}, "HOROVOD_AUTOTUNE", "1"},
      {{"--autotune-log-file", "/tmp/tune log.csv"}, "HOROVOD_AUTOTUNE_LOG", "/tmp/tune log.csv"},
      {{"--autotune-warmup-samples", "2"}, "HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "2"},
      {{"--autotune-steps-per-sample", "5"}, "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "5"},
      {{"--autotune-bayes-opt-max-samples", "12"}, "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "12"},
      {{"--autotune-gaussian-process-noise", "0.5"}, "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "0.5"},
      {{"--dynamic-process-sets"}, "HOROVOD_DYNAMIC_PROCESS_SETS", "1"},
      {{"--log-level", "debug"}, "HOROVOD_LOG_LEVEL", "debug"},
      {{"--log-without-timestamp"}, "HOROVOD_LOG_HIDE_TIME", "1"},
  };
  std::size_t with_flag = 0;
  for (const auto& spec : hvd::detail::setting_specs()) with_flag += spec.flag[0] != '\0';
  CHECK(cases.size() == with_flag);  // a new flag in the settings table needs a case here
  for (const auto& c : cases) {
    INFO(c.flag.front());
    auto plan = plan_for(concat({{"-np", "4"}, c.flag, {"prog", "x"}}));
    CHECK(plan.argv == concat({kRootLocal4, kForwarded, {"-x", c.env, "prog", "x"}}));
    CHECK(plan.added == Environment{{c.env, c.value}});
    REQUIRE(find_env(plan.child_env, c.env) != nullptr);
    CHECK(std::string(find_env(plan.child_env, c.env)) == c.value);
  }
}

TEST_CASE("knob flags: set in the child environment and exported with -x") {
  Environment env = kEnv;
  env.emplace_back("HOROVOD_FUSION_THRESHOLD", "1");  // the flag wins over the inherited value
  env.emplace_back("HOROVOD_CYCLE_TIME", "5");        // inherited, forwarded as it is
  auto plan = plan_for({"-np", "4", "--fusion-threshold-mb", "64", "--no-stall-check",
                        "--timeline-filename", "/tmp/t.json", "prog"},
                       env);
  const Environment added = {{"HOROVOD_FUSION_THRESHOLD", "67108864"},
                             {"HOROVOD_TIMELINE", "/tmp/t.json"},
                             {"HOROVOD_STALL_CHECK_DISABLE", "1"}};
  CHECK(plan.added == added);
  CHECK(plan.argv == concat({kRootLocal4,
                             {"-x", "HOME", "-x", "HOROVOD_CYCLE_TIME", "-x", "LANG", "-x", "PATH",
                              "-x", "HOROVOD_FUSION_THRESHOLD", "-x", "HOROVOD_TIMELINE", "-x",
                              "HOROVOD_STALL_CHECK_DISABLE", "prog"}}));
  CHECK(std::string(find_env(plan.child_env, "HOROVOD_FUSION_THRESHOLD")) == "67108864");
  CHECK(std::string(find_env(plan.child_env, "HOROVOD_CYCLE_TIME")) == "5");
  CHECK(std::string(find_env(plan.child_env, "HOROVOD_TIMELINE")) == "/tmp/t.json");
}

TEST_CASE("a bad HOROVOD_* value in the environment fails before launch unless a flag replaces it") {
  Environment env = kEnv;
  env.emplace_back("HOROVOD_CYCLE_TIME", "fast");
  CHECK_THAT(plan_error({"-np", "2", "prog"}, env),
             Catch::Contains("HOROVOD_CYCLE_TIME='fast' is not valid"));
  CHECK(plan_for({"-np", "2", "--cycle-time-ms", "3", "prog"}, env).added ==
        Environment{{"HOROVOD_CYCLE_TIME", "3"}});
}

TEST_CASE("hosts from -H and --hostfile; -np defaults to the slots") {
  auto plan = plan_for({"-np", "3", "-H", "a:2,b:2", "prog"});
  CHECK_FALSE(plan.local);
  CHECK(plan.argv == concat({{"mpirun", "--allow-run-as-root", "-np", "3", "-H", "a:2,b:2",
                              "-bind-to", "none", "-map-by", "slot", "--tag-output"},
                             kForwarded, {"prog"}}));
  CHECK(plan_for({"-H", "a:2,b:2", "prog"}).argv[3] == "4");

  const std::string path = "/tmp/hvd_launcher_hostfile_" + std::to_string(getpid());
  std::ofstream(path) << "# test\nn1 slots=2\nn2 slots=3\n";
  auto from_file = plan_for({"--hostfile", path, "-np", "5", "prog"});
  std::remove(path.c_str());
  CHECK(from_file.argv == concat({{"mpirun", "--allow-run-as-root", "-np", "5", "-H", "n1:2,n2:3",
                                   "-bind-to", "none", "-map-by", "slot", "--tag-output"},
                                  kForwarded, {"prog"}}));
  CHECK_FALSE(from_file.local);
}

TEST_CASE("hosts that are all this machine count as a local launch (the program is checked)") {
  CHECK(plan_for({"-H", "localhost:2", "prog"}).local);
  CHECK(plan_for({"-H", "localhost:1,127.0.0.1:1", "prog"}).local);
  CHECK_FALSE(plan_for({"-H", "localhost:1,192.0.2.7:1", "prog"}).local);
  const std::string path = "/tmp/hvd_launcher_local_hostfile_" + std::to_string(getpid());
  std::ofstream(path) << "localhost slots=3\n";
  auto plan = plan_for({"--hostfile", path, "prog"});
  std::remove(path.c_str());
  CHECK(plan.local);
  CHECK(plan.argv[3] == "3");
}

TEST_CASE("slots fewer than np, and no -np without hosts, are errors") {
  CHECK_THAT(plan_error({"-np", "5", "-H", "a:2,b:2", "prog"}),
             Catch::Contains("-np 5 needs 5 slots but the hosts give 4 (a:2,b:2)"));
  CHECK_THAT(plan_error({"prog"}), Catch::Contains("-np is required"));
  CHECK_THAT(plan_error({"--hostfile", "/nonexistent/h", "prog"}),
             Catch::Contains("cannot read hostfile"));
}

TEST_CASE("inside a Slurm allocation hvdrun runs srun with the task count") {
  Environment env = kEnv;
  env.emplace_back("SLURM_JOB_ID", "4242");
  auto plan = plan_for({"-np", "8", "--fusion-threshold-mb", "1", "--mpi-args", "--mpi=pmix",
                        "prog", "x"},
                       env);
  CHECK(plan.launcher == "srun");
  CHECK_THAT(plan.note, Catch::Contains("SLURM_JOB_ID=4242") && Catch::Contains("srun"));
  CHECK(plan.argv == Args{"srun", "--ntasks=8", "--kill-on-bad-exit=1", "--quit-on-interrupt",
                          "--label", "--cpu-bind=none", "--mpi=pmix", "prog", "x"});
  CHECK(std::string(find_env(plan.child_env, "HOROVOD_FUSION_THRESHOLD")) == "1048576");
  // Explicit hosts still mean mpirun.
  CHECK(plan_for({"-np", "2", "-H", "a:2", "prog"}, env).launcher == "mpirun");
  CHECK_THAT(plan_error({"-np", "2", "--output-filename", "o", "prog"}, env),
             Catch::Contains("not supported under srun"));
  CHECK(plan_for({"-np", "2", "-p", "22", "prog"}, env).warnings.size() == 1);
  // --network-interfaces is ignored under srun, NCCL_SOCKET_IFNAME included.
  CHECK(plan_for({"-np", "2", "--network-interfaces", "eth0", "prog"}, env).added.empty());
}

TEST_CASE("inside Slurm -np defaults to SLURM_NTASKS, and the note says so") {
  Environment env = kEnv;
  env.emplace_back("SLURM_JOB_ID", "77");
  CHECK_THAT(plan_error({"prog"}, env), Catch::Contains("-np is required") &&
                                            Catch::Contains("SLURM_NTASKS is not"));
  env.emplace_back("SLURM_NTASKS", "6");
  auto plan = plan_for({"prog"}, env);
  CHECK(plan.argv == Args{"srun", "--ntasks=6", "--kill-on-bad-exit=1", "--quit-on-interrupt",
                          "--label", "--cpu-bind=none", "prog"});
  CHECK(plan.note == "inside a Slurm allocation (SLURM_JOB_ID=77): running srun instead of "
                     "mpirun, -np 6 from SLURM_NTASKS");
  auto explicit_np = plan_for({"-np", "2", "prog"}, env);  // -np wins, and no note about it
  CHECK(explicit_np.argv[1] == "--ntasks=2");
  CHECK(explicit_np.note == "inside a Slurm allocation (SLURM_JOB_ID=77): running srun instead of mpirun");
  env.back().second = "6(x2)";
  CHECK_THAT(plan_error({"prog"}, env), Catch::Contains("SLURM_NTASKS='6(x2)' is not a whole number"));
}

TEST_CASE("--mpi-args is split as a shell would: quotes and backslashes") {
  auto plan = plan_for({"-np", "4", "--mpi-args",
                        R"(--mca plm_rsh_agent "/opt/my agent.sh" -x 'A=b c' d\ e "q\"x")", "prog"});
  CHECK(plan.argv == concat({kRootLocal4, kForwarded,
                             {"--mca", "plm_rsh_agent", "/opt/my agent.sh", "-x", "A=b c", "d e",
                              "q\"x", "prog"}}));
  CHECK_THAT(plan_error({"-np", "1", "--mpi-args", "--mca x 'y", "prog"}),
             Catch::Contains("--mpi-args '--mca x 'y': an unclosed single quote"));
}

TEST_CASE("forwarded names skip CUDA_VISIBLE_DEVICES, shell functions and odd names") {
  Environment env = {{"B", "1"}, {"A_1", "2"}, {"CUDA_VISIBLE_DEVICES", "3"},
                     {"BASH_FUNC_f%%", "()"}, {"1BAD", "x"}, {"A-B", "y"}, {"B", "dup"}};
  CHECK(forwarded_names(env) == Args{"A_1", "B"});
}

TEST_CASE("PATH lookup") {
  CHECK(find_program("sh", {{"PATH", "/nonexistent:/bin:/usr/bin"}}).find("/sh") != std::string::npos);
  CHECK(find_program("sh", {{"PATH", "/nonexistent"}}).empty());
  CHECK(find_program("/bin/sh", {}) == "/bin/sh");
  CHECK(find_program("/nonexistent/sh", {}).empty());
  CHECK(find_program("/tmp", {}).empty());            // a directory is not a program
  CHECK(find_program("passwd", {{"PATH", "/etc"}}).empty());  // not executable
}

TEST_CASE("--start-timeout host check uses mpirun's agent and rsh arguments") {
  auto o = parse_command_line({"-np", "2", "-H", "n1:2", "-p", "2200", "-i", "/k", "p"}).options;
  CHECK(host_check_argv(o, kEnv, "n1") ==
        Args{"ssh", "-o", "BatchMode=yes", "-p", "2200", "-i", "/k", "n1", "true"});
  auto with_agent = parse_command_line({"-np", "2", "-H", "n1:2", "--mpi-args",
                                        "--mca plm_rsh_agent /opt/agent.sh", "p"}).options;
  CHECK(host_check_argv(with_agent, kEnv, "n1") == Args{"/opt/agent.sh", "n1", "true"});
  Environment env = kEnv;
  env.emplace_back("OMPI_MCA_plm_rsh_agent", "rsh : ssh");
  CHECK(rsh_agent_command(parse_command_line({"-np", "1", "p"}).options, env) == Args{"rsh"});
  // A quoted agent with its own arguments (Open MPI splits the agent on spaces, as here).
  auto quoted = parse_command_line({"-np", "2", "-H", "n1:2", "--mpi-args",
                                    "--mca plm_rsh_agent 'ssh -q' --mca btl tcp,self", "p"}).options;
  CHECK(host_check_argv(quoted, kEnv, "n1") ==
        Args{"ssh", "-o", "BatchMode=yes", "-q", "n1", "true"});
  CHECK(is_this_machine("localhost"));
  CHECK(is_this_machine("127.0.0.1"));
  CHECK_FALSE(is_this_machine("192.0.2.77"));  // TEST-NET-1, never a local address
}

TEST_CASE("horovodrun's launch flags: --tcp, --binding-args, -prefix-timestamp, --mpi, -hostfile, aliases") {
  char path[] = "/tmp/hvdrun_hostfile_XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  std::ofstream(path) << "localhost slots=4\n";
  auto plan = plan_for({"--mpi", "-np", "4", "-hostfile", path, "--tcp", "--binding-args", "-bind-to core -map-by core",
                        "-prefix-timestamp", "--network-interface", "eth1", "--disable-cache", "prog"});
  std::remove(path);
  CHECK(plan.argv == concat({{"mpirun", "--allow-run-as-root", "-np", "4", "-H", "localhost:4", "-bind-to", "core",
                              "-map-by", "core", "--tag-output", "--timestamp-output", "-mca", "pml", "ob1", "-mca",
                              "btl", "tcp,self", "-mca", "btl_tcp_if_include", "eth1", "-mca", "oob_tcp_if_include",
                              "eth1"},
                             kForwarded,
                             {"-x", "NCCL_SOCKET_IFNAME", "prog"}}));
  CHECK(plan.warnings.empty());
  // --prefix-output-with-timestamp is the long name; under srun these are mpirun's and ignored.
  CHECK(plan_for({"-np", "4", "--prefix-output-with-timestamp", "prog"}).argv ==
        concat({kRootLocal4, {"--timestamp-output"}, kForwarded, {"prog"}}));
  Environment slurm = kEnv;
  slurm.emplace_back("SLURM_JOB_ID", "7");
  auto srun = plan_for({"-np", "2", "--tcp", "prog"}, slurm);
  CHECK(srun.launcher == "srun");
  REQUIRE(srun.warnings.size() == 1);
  CHECK_THAT(srun.warnings[0], Catch::Contains("--tcp") && Catch::Contains("ignored under srun"));
}

TEST_CASE("horovodrun's switches set their variable; flags of features horovodcpp lacks warn, --jsrun is refused") {
  auto plan = plan_for({"-np", "4", "--no-autotune", "--stall-check", "--no-hierarchical-allreduce",
                        "--no-timeline-mark-cycles", "--log-hide-timestamp", "prog"});
  CHECK(plan.added == Environment{{"HOROVOD_HIERARCHICAL_ALLREDUCE", "0"},
                                  {"HOROVOD_AUTOTUNE", "0"},
                                  {"HOROVOD_TIMELINE_MARK_CYCLES", "0"},
                                  {"HOROVOD_STALL_CHECK_DISABLE", "0"},
                                  {"HOROVOD_LOG_HIDE_TIME", "1"}});
  CHECK(plan.warnings.empty());
  CHECK(plan_for({"-np", "4", "--log-with-timestamp", "prog"}).added == Environment{{"HOROVOD_LOG_HIDE_TIME", "0"}});
  CHECK(plan_for({"-np", "4", "--log-without-timestamp", "prog"}).added ==
        Environment{{"HOROVOD_LOG_HIDE_TIME", "1"}});

  auto lacking = plan_for({"-np", "4", "--gloo", "--num-nccl-streams", "2", "--thread-affinity", "1",
                           "--gloo-timeout-seconds", "30", "--mpi-threads-disable", "--hierarchical-allgather",
                           "--torus-allreduce", "--no-torus-allreduce", "--no-hierarchical-allgather",
                           "--no-mpi-threads-disable", "prog"});
  CHECK(lacking.argv == concat({kRootLocal4, kForwarded, {"prog"}}));
  CHECK(lacking.added.empty());
  REQUIRE(lacking.warnings.size() == 7);
  CHECK_THAT(lacking.warnings[0], Catch::StartsWith("--gloo: horovodcpp has no Gloo controller; the job runs over Open MPI"));
  CHECK_THAT(lacking.warnings[1], Catch::StartsWith("--num-nccl-streams 2 changes nothing: "));
  CHECK_THAT(lacking.warnings[2], Catch::StartsWith("--thread-affinity 1 changes nothing: "));
  CHECK_THAT(lacking.warnings[3], Catch::StartsWith("--gloo-timeout-seconds 30 changes nothing: "));
  CHECK_THAT(lacking.warnings[4], Catch::Contains("MPI_THREAD_MULTIPLE"));
  CHECK_THAT(lacking.warnings[5], Catch::StartsWith("--hierarchical-allgather changes nothing: "));
  CHECK_THAT(lacking.warnings[6], Catch::StartsWith("--torus-allreduce changes nothing: "));

  CHECK_THAT(plan_error({"-np", "2", "--jsrun", "prog"}),
             Catch::StartsWith("--jsrun: hvdrun launches through Open MPI's mpirun"));
  CHECK_THAT(plan_error({"-np", "2", "--config-file", "hvd.yaml", "prog"}),
             Catch::StartsWith("--config-file hvd.yaml: hvdrun reads no YAML config file; pass its settings as flags"));
}
