// hvdrun's elastic parts without launching a job: flag checks, discovery output parsing (and a
// real script that fails, hangs or prints garbage), the host pool's failed slots and cooldowns,
// and the exact relaunch argv for mpirun and for srun --exclude.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>

#include "discovery.h"
#include "elastic_driver.h"
#include "horovodcpp/horovod.h"
#include "host_pool.h"
#include "launch_options.h"

using namespace hvd::launcher;
using Args = std::vector<std::string>;
using Catch::Matchers::Contains;

namespace {

const Environment kEnv = {{"PATH", "/usr/bin:/bin"}, {"HOME", "/root"}};

LaunchOptions parse(const Args& args) { return parse_command_line(args).options; }

std::string hosts_text(const std::vector<HostSlots>& hosts) { return host_list_string(hosts); }

bool has_pair(const Args& argv, const std::string& a, const std::string& b) {
  for (std::size_t i = 0; i + 1 < argv.size(); ++i)
    if (argv[i] == a && argv[i + 1] == b) return true;
  return false;
}

}  // namespace

TEST_CASE("elastic flags parse to their values") {
  auto o = parse({"-np", "2", "--host-discovery-script", "./discover.sh", "--min-np", "2",
                  "--max-np", "8", "--slots-per-host", "4", "--reset-limit", "3",
                  "--blacklist-cooldown-range", "10", "100", "--elastic-timeout", "30", "./train",
                  "--epochs", "2"});
  CHECK(o.host_discovery_script == "./discover.sh");
  CHECK(o.min_np == 2);
  CHECK(o.max_np == 8);
  CHECK(o.slots_per_host == 4);
  CHECK(o.reset_limit == 3);
  CHECK(o.cooldown_min == 10);
  CHECK(o.cooldown_max == 100);
  CHECK(o.elastic_timeout == 30);
  CHECK(o.command == Args{"./train", "--epochs", "2"});
}

TEST_CASE("bad elastic flags are refused with the flag and value named") {
  CHECK_THROWS_WITH(parse({"--host-discovery-script", "d", "--min-np", "4", "--max-np", "2", "t"}),
                    "--min-np 4 is greater than --max-np 2");
  CHECK_THROWS_WITH(parse({"-np", "4", "--host-discovery-script", "d", "--max-np", "2", "t"}),
                    "--min-np 4 (from -np) is greater than --max-np 2");
  CHECK_THROWS_WITH(parse({"-np", "2", "--min-np", "2", "t"}),
                    "--min-np needs --host-discovery-script (elastic mode)");
  CHECK_THROWS_WITH(parse({"--host-discovery-script", "d", "t"}),
                    Contains("elastic mode needs -np or --min-np"));
  CHECK_THROWS_WITH(parse({"-np", "2", "--host-discovery-script", "d", "-H", "a:2", "t"}),
                    Contains("replaces -H/--hosts and --hostfile"));
  CHECK_THROWS_WITH(parse({"-np", "2", "--host-discovery-script", "d", "--blacklist-cooldown-range",
                           "9", "3", "t"}),
                    Contains("MIN is greater than MAX"));
  CHECK_THROWS_WITH(parse({"-np", "2", "--host-discovery-script", "d", "--blacklist-cooldown-range",
                           "x", "3", "t"}),
                    Contains("--blacklist-cooldown-range MIN 'x'"));
  CHECK_THROWS_WITH(parse({"-np", "2", "--host-discovery-script", "d", "--elastic-timeout", "0", "t"}),
                    Contains("--elastic-timeout '0'"));
}

TEST_CASE("discovery output: HOST, HOST:SLOTS, comments; bad lines named") {
  auto hosts = parse_discovery_output("# pool\nnode1:4\n\n  node2  \n10.0.0.3:2 # spare\n", "d.sh", 3);
  CHECK(hosts_text(hosts) == "node1:4,node2:3,10.0.0.3:2");
  CHECK(parse_discovery_output("", "d.sh", 1).empty());
  CHECK_THROWS_WITH(parse_discovery_output("node1:4\nnode2:abc\n", "d.sh", 1),
                    "host discovery script 'd.sh' line 2: 'node2:abc': expected HOST or HOST:SLOTS "
                    "with SLOTS a whole number >= 1");
  CHECK_THROWS_WITH(parse_discovery_output("node1:0\n", "d.sh", 1), Contains("line 1: 'node1:0'"));
  CHECK_THROWS_WITH(parse_discovery_output("ok\nhello world\n", "d.sh", 1),
                    Contains("line 2: 'hello world': expected HOST or HOST:SLOTS"));
  CHECK_THROWS_WITH(parse_discovery_output("a:1\na:2\n", "d.sh", 1),
                    Contains("line 2: 'a:2': host 'a' is listed twice"));
}

TEST_CASE("a discovery script that fails, hangs or prints garbage is named in the error") {
  const std::string dir = "/tmp/hvd-elastic-unit-" + std::to_string(::getpid());
  REQUIRE(std::system(("mkdir -p " + dir).c_str()) == 0);
  const std::string failing = dir + "/fail.sh", garbage = dir + "/garbage.sh";
  std::ofstream(failing) << "echo 'cannot reach the cluster API' >&2; exit 3\n";
  std::ofstream(garbage) << "echo localhost:2; echo '<html>'\n";
  CHECK_THROWS_WITH(discover_hosts("sh " + failing, 1, kEnv),
                    "host discovery script 'sh " + failing + "' exited with code 3; its last error "
                    "line: 'cannot reach the cluster API'");
  CHECK_THROWS_WITH(discover_hosts("sh " + garbage, 1, kEnv),
                    Contains("host discovery script 'sh " + garbage + "' line 2: '<html>'"));
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(discover_hosts("sleep 30", 1, kEnv, std::chrono::milliseconds(500)),
                    "host discovery script 'sleep 30' did not finish within 0 s (killed)");
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  CHECK(hosts_text(discover_hosts("echo localhost:4", 1, kEnv)) == "localhost:4");
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("a failed rank takes one slot of its host out, for good or for a growing cooldown") {
  using Clock = HostPool::Clock;
  const auto t0 = Clock::now();
  HostPool forever(std::nullopt);
  forever.set_discovered({{"a", 4}, {"b", 2}});
  CHECK(forever.mark_failed("a", 4, t0) == 0);
  CHECK(hosts_text(forever.usable(t0 + std::chrono::hours(1))) == "a:3,b:2");
  CHECK(hosts_text(forever.assign(4, t0)) == "a:3,b:1");
  CHECK(forever.blacklist_summary(t0) == "a (1 slot for good)");

  HostPool pool(HostPool::Cooldown{2, 5});
  pool.set_discovered({{"a", 1}, {"b", 2}});
  CHECK(pool.mark_failed("a", 1, t0) == 2);
  CHECK(hosts_text(pool.usable(t0)) == "b:2");
  CHECK(pool.blacklisted(t0) == std::vector<std::string>{"a"});
  CHECK(hosts_text(pool.usable(t0 + std::chrono::seconds(2))) == "a:1,b:2");
  CHECK(pool.mark_failed("a", 1, t0) == 4);  // the second failure doubles the cooldown
  CHECK(pool.mark_failed("a", 1, t0) == 5);  // capped at MAX
  CHECK(hosts_text(pool.usable(t0 + std::chrono::seconds(4))) == "b:2");
  CHECK(hosts_text(pool.usable(t0 + std::chrono::seconds(5))) == "a:1,b:2");
}

TEST_CASE("slots discovery drops after a failure are taken as the failed ones, not as more lost slots") {
  using Clock = HostPool::Clock;
  const auto t0 = Clock::now();
  HostPool pool(std::nullopt);
  pool.set_discovered({{"a", 8}, {"b", 2}});
  pool.mark_failed("a", 8, t0);
  CHECK(hosts_text(pool.usable(t0)) == "a:7,b:2");  // discovery still offers the failed slot
  pool.set_discovered({{"a", 7}, {"b", 2}});        // its health check dropped it
  CHECK(hosts_text(pool.usable(t0)) == "a:7,b:2");
  pool.set_discovered({{"a", 5}, {"b", 2}});  // and more: none of them counts twice
  CHECK(hosts_text(pool.usable(t0)) == "a:5,b:2");
  pool.set_discovered({{"a", 10}, {"b", 2}});  // grown: the failed slot stays out
  CHECK(hosts_text(pool.usable(t0)) == "a:9,b:2");
  // A second failure at 7 offered: the one dropped covers one of the two.
  pool.set_discovered({{"a", 7}, {"b", 2}});
  pool.mark_failed("a", 7, t0);
  CHECK(hosts_text(pool.usable(t0)) == "a:6,b:2");
  // The launch ran more ranks on a host than discovery offers by the time one failed (it shrank
  // first): the ranks that ran count, so 2 ran, 1 failed, 1 offered leaves that 1.
  HostPool shrunk(std::nullopt);
  shrunk.set_discovered({{"localhost", 1}});
  shrunk.mark_failed("localhost", 2, t0);
  CHECK(hosts_text(shrunk.usable(t0)) == "localhost:1");
  // A job that ran 4 of a host's 8 (--max-np): one failed leaves 7.
  HostPool partial(std::nullopt);
  partial.set_discovered({{"a", 8}});
  partial.mark_failed("a", 4, t0);
  CHECK(hosts_text(partial.usable(t0)) == "a:7");
}

TEST_CASE("ranks map to hosts in -H order (mpirun -map-by slot)") {
  const std::vector<HostSlots> hosts = {{"a", 2}, {"b", 3}};
  CHECK(host_of_rank(hosts, 0) == "a");
  CHECK(host_of_rank(hosts, 1) == "a");
  CHECK(host_of_rank(hosts, 2) == "b");
  CHECK(host_of_rank(hosts, 4) == "b");
  CHECK(host_of_rank(hosts, 5).empty());
}

TEST_CASE("an elastic launch runs mpirun on the assigned hosts with the job's name") {
  auto o = parse({"-np", "2", "--host-discovery-script", "d", "./train"});
  auto plan = elastic_launch_plan(o, LaunchContext{kEnv, true}, {{"n1", 3}, {"n2", 1}}, {"n3"}, "job7");
  CHECK(plan.launcher == "mpirun");
  CHECK(has_pair(plan.argv, "-np", "4"));
  CHECK(has_pair(plan.argv, "-H", "n1:3,n2:1"));
  CHECK(has_pair(plan.argv, "-x", "HOROVOD_ELASTIC_JOB"));
  CHECK(plan.argv.back() == "./train");
  bool named = false;
  for (const auto& [k, v] : plan.child_env) named = named || (k == "HOROVOD_ELASTIC_JOB" && v == "job7");
  CHECK(named);
}

TEST_CASE("inside Slurm a relaunch leaves the failed nodes out with srun --exclude") {
  Environment env = kEnv;
  env.push_back({"SLURM_JOB_ID", "42"});
  env.push_back({"SLURM_NTASKS", "8"});
  auto o = parse({"-np", "6", "--host-discovery-script", "d", "./train"});
  auto plan = elastic_launch_plan(o, LaunchContext{env, false}, {{"n1", 4}, {"n3", 2}}, {"n2"}, "j");
  CHECK(plan.argv == Args{"srun", "--exclude=n2", "--ntasks=6", "--kill-on-bad-exit=1",
                          "--quit-on-interrupt", "--label", "--cpu-bind=none", "./train"});
  auto first = elastic_launch_plan(o, LaunchContext{env, false}, {{"n1", 4}, {"n2", 4}}, {}, "j");
  CHECK(first.argv[1] == "--ntasks=8");
}

TEST_CASE("hosts whose mpirun daemon was lost are read from Open MPI's report") {
  const std::string report =
      "--------------------------------------------------------------------------\n"
      "ORTE has lost communication with a remote daemon.\n\n"
      "  HNP daemon   : [[5120,0],0] on node head\n"
      "  Remote daemon: [[5120,0],2] on node 10.77.0.3\n\n"
      "This is usually due to either a failure of the TCP network\n";
  CHECK(lost_daemon_hosts(report) == std::vector<std::string>{"10.77.0.3"});
  CHECK(lost_daemon_hosts(report + report).size() == 1);
  CHECK(lost_daemon_hosts("mpirun noticed that process rank 1 with PID 0 on node vm exited").empty());
}
