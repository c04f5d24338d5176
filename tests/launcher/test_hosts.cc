// -H host lists and hostfiles: accepted forms and errors (with the hostfile line number).
#include <catch2/catch.hpp>
#include <sstream>
#include <vector>

#include "horovodcpp/horovod.h"
#include "discovery.h"
#include "hosts.h"

using namespace hvd::launcher;

namespace {

std::string list_error(const std::string& text) {
  try {
    parse_host_list(text);
  } catch (const hvd::Error& e) {
    return e.what();
  }
  return "no error";
}

std::vector<HostSlots> hostfile(const std::string& text) {
  std::istringstream in(text);
  return parse_hostfile(in, "hosts.txt");
}

std::string hostfile_error(const std::string& text) {
  try {
    hostfile(text);
  } catch (const hvd::Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("-H host lists") {
  auto hosts = parse_host_list("node-1:2,10.0.0.7:4,gpu3");
  REQUIRE(hosts.size() == 3);
  CHECK(hosts[0].host == "node-1");
  CHECK(hosts[0].slots == 2);
  CHECK(hosts[1].host == "10.0.0.7");
  CHECK(hosts[1].slots == 4);
  CHECK(hosts[2].host == "gpu3");
  CHECK(hosts[2].slots == 1);
  CHECK(total_slots(hosts) == 7);
  CHECK(host_list_string(hosts) == "node-1:2,10.0.0.7:4,gpu3:1");
}

TEST_CASE("-H errors name the bad entry") {
  CHECK_THAT(list_error("a:0"), Catch::Contains("bad slot count '0' for host 'a'"));
  CHECK_THAT(list_error("a:two"), Catch::Contains("bad slot count 'two'"));
  CHECK_THAT(list_error("a:-2"), Catch::Contains("bad slot count '-2'"));
  CHECK_THAT(list_error("a:2,,b"), Catch::Contains("bad host name ''"));
  CHECK_THAT(list_error("a:2,"), Catch::Contains("empty entry"));
  CHECK_THAT(list_error(":3"), Catch::Contains("bad host name ''"));
  CHECK_THAT(list_error(""), Catch::Contains("empty host list"));
  CHECK_THAT(list_error("a:1:2"), Catch::Contains("bad slot count '1:2'"));
}

TEST_CASE("hostfiles: HOST slots=N, HOST:N, HOST; comments and blank lines") {
  auto hosts = hostfile("# cluster\n\nalpha slots=4\n  beta:2   # two GPUs\ngamma\r\ndelta slots=1\n");
  REQUIRE(hosts.size() == 4);
  CHECK(host_list_string(hosts) == "alpha:4,beta:2,gamma:1,delta:1");
}

TEST_CASE("hostfile errors give the line number") {
  CHECK_THAT(hostfile_error("a slots=2\n# ok\nb slots=x\n"),
             Catch::Contains("hosts.txt line 3") && Catch::Contains("bad slot count 'x'"));
  CHECK_THAT(hostfile_error("a slots=2\nb c\n"),
             Catch::Contains("line 2") && Catch::Contains("unexpected 'c'"));
  CHECK_THAT(hostfile_error("a slots=2 max_slots=4\n"),
             Catch::Contains("line 1") && Catch::Contains("unexpected 'max_slots=4'"));
  CHECK_THAT(hostfile_error("\n\n\na:2 slots=3\n"), Catch::Contains("line 4"));
  CHECK_THAT(hostfile_error("a slots=0\n"), Catch::Contains("line 1"));
  CHECK_THAT(hostfile_error("# nothing\n\n"), Catch::Contains("lists no hosts"));
  CHECK_THAT(hostfile_error("a=b slots=1\n"), Catch::Contains("bad host name 'a=b'"));
}

// One check (host_name_problem) for -H, hostfiles and discovery output: shell syntax never
// reaches the ssh command line hvdrun runs or the one --dry-run prints.
TEST_CASE("host names with shell syntax are refused from -H, hostfiles and discovery alike") {
  for (const std::string name : std::vector<std::string>{"a;b", "$(id)", "`id`", "a|b", "a&b", "a'b", "a\"b", "a\\b", "a>b", "a$b", "a*",
                                 "a(b)", "a\nb", std::string(256, 'a')}) {
    INFO(name);
    CHECK_THAT(host_name_problem(name), Catch::Contains("bad host name '" + name + "'"));
    CHECK_THAT(list_error(name + ":2"), Catch::Contains("bad host name '" + name + "'"));
    if (name.find('\n') == std::string::npos) {
      CHECK_THAT(hostfile_error(name + " slots=2\n"), Catch::Contains("line 1") && Catch::Contains("bad host name"));
      CHECK_THAT(hostfile_error("ok slots=1\n" + name + ":2\n"), Catch::Contains("line 2") && Catch::Contains("bad host name"));
      CHECK_THROWS_WITH(hvd::launcher::parse_discovery_output(name + ":2\n", "d.sh", 1),
                        Catch::Contains("line 1") && Catch::Contains("bad host name"));
    }
  }
  CHECK_THAT(host_name_problem("a;b"), Catch::Contains("only letters, digits, '.', '-' and '_'"));
  for (const std::string name : std::vector<std::string>{"node-1", "10.0.0.7", "gpu_3.cluster.example", "LOCALHOST", std::string(255, 'a')}) {
    INFO(name);
    CHECK(host_name_problem(name).empty());
  }
}

TEST_CASE("a missing hostfile is an error naming it") {
  try {
    read_hostfile("/nonexistent/hvd-hosts");
    FAIL("no error");
  } catch (const hvd::Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("cannot read hostfile /nonexistent/hvd-hosts"));
  }
}
