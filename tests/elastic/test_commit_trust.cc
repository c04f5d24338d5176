// What the commit store refuses (Note [What the commit store trusts], commit_store.h): damaged
// headers of every kind, skipped for the commit before with a warning naming the file and what
// was wrong, quickly and without allocating what a header claims; and what a second local user
// plants (run as uid 65534 through setpriv, as root): a store directory, a commit file, a
// symlink where a temporary file goes. Each is refused with its message, and the job's own
// commits and files are untouched. Without root or setpriv those cases say why and skip.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>

#include "elastic/commit_store.h"
#include "horovodcpp/horovod.h"

using hvd::detail::CommitStore;
using Catch::Matchers::Contains;

namespace {

constexpr const char* kNobody = "setpriv --reuid=65534 --regid=65534 --clear-groups";

int run(const std::string& command) { return std::system(command.c_str()); }

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

void put(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// A scratch directory like /tmp: root's, world-writable, sticky.
std::string shared_tmp(const std::string& tag) {
  const std::string dir = "/tmp/hvd-trust-" + tag + "-" + std::to_string(getpid());
  run("rm -rf " + dir);
  ::mkdir(dir.c_str(), 0700);
  ::chmod(dir.c_str(), 01777);
  return dir;
}

// Why a second user cannot be simulated here, or "" when it can.
std::string no_second_user() {
  if (geteuid() != 0) return "not root (uid " + std::to_string(geteuid()) + "): setpriv cannot switch to uid 65534";
  if (run(std::string(kNobody) + " true >/dev/null 2>&1") != 0)
    return "'" + std::string(kNobody) + " true' failed (no setpriv, or no CAP_SETUID here)";
  return {};
}

// Runs `command` as uid 65534 (nobody).
void as_nobody(const std::string& command) {
  REQUIRE(run(std::string(kNobody) + " sh -c '" + command + "'") == 0);
}

std::vector<std::string> skipped_by(const CommitStore& store, std::int64_t* newest) {
  std::vector<std::string> skipped;
  *newest = store.newest_id(&skipped);
  return skipped;
}

}  // namespace

TEST_CASE("a damaged commit header is skipped for the commit before, naming the file and what is wrong",
          "[elastic][trust]") {
  const std::string dir = "/tmp/hvd-trust-damaged-" + std::to_string(getpid());
  run("rm -rf " + dir);
  const CommitStore store(dir);
  store.write({7, 2, "seven"});
  const std::string good = std::string(100, 'x');
  const std::string sum = [&] {
    store.write({8, 2, good});
    const std::string all = slurp(store.path_of(8));
    return all.substr(all.find("fnv1a="), 22);
  }();
  const std::string eight = store.path_of(8);
  struct Case {
    const char* what;
    std::string bytes;
    std::string expected;
  };
  const std::string payload = good;
  const std::vector<Case> cases = {
      {"bytes 99999999999999", "HVDCOMMIT1 id=8 size=2 bytes=99999999999999 " + sum + "\n" + payload,
       "bytes=99999999999999 but the file holds 100 bytes after its header"},
      {"bytes 2^64-1", "HVDCOMMIT1 id=8 size=2 bytes=18446744073709551615 " + sum + "\n" + payload,
       "bytes=18446744073709551615 but the file holds 100 bytes"},
      {"bytes 4000000000", "HVDCOMMIT1 id=8 size=2 bytes=4000000000 " + sum + "\n" + payload, "bytes=4000000000"},
      {"bytes negative", "HVDCOMMIT1 id=8 size=2 bytes=-1 " + sum + "\n" + payload, "bytes=-1"},
      {"bytes one short", "HVDCOMMIT1 id=8 size=2 bytes=99 " + sum + "\n" + payload, "bytes=99 but the file holds 100"},
      {"another id", "HVDCOMMIT1 id=1000 size=2 bytes=100 " + sum + "\n" + payload,
       "id=1000 but the file is named for commit 8"},
      {"id past int64", "HVDCOMMIT1 id=99999999999999999999999 size=2 bytes=100 " + sum + "\n" + payload,
       "id=99999999999999999999999 but"},
      {"size 0", "HVDCOMMIT1 id=8 size=0 bytes=100 " + sum + "\n" + payload, "size=0 is not a world size"},
      {"size past int", "HVDCOMMIT1 id=8 size=4294967297 bytes=100 " + sum + "\n" + payload, "size=4294967297 is not"},
      {"size negative", "HVDCOMMIT1 id=8 size=-3 bytes=100 " + sum + "\n" + payload, "size=-3 is not"},
      {"checksum not hex", "HVDCOMMIT1 id=8 size=2 bytes=100 fnv1a=zz\n" + payload, "fnv1a=zz is not a 16-digit"},
      {"checksum wrong", "HVDCOMMIT1 id=8 size=2 bytes=100 fnv1a=0123456789abcdef\n" + payload,
       "checksum does not match"},
      {"a field missing", "HVDCOMMIT1 id=8 size=2 " + sum + "\n" + payload, "not a commit header"},
      {"a field more", "HVDCOMMIT1 id=8 size=2 bytes=100 " + sum + " extra=1\n" + payload, "not a commit header"},
      {"other magic", "HVDCOMMIT9 id=8 size=2 bytes=100 " + sum + "\n" + payload, "not a commit header"},
      {"truncated in the header", "HVDCOMMIT1 id=8 si", "truncated: the file (18 bytes) ends inside its header"},
      {"truncated payload", "HVDCOMMIT1 id=8 size=2 bytes=100 " + sum + "\n" + payload.substr(0, 60),
       "bytes=100 but the file holds 60"},
      {"empty", "", "truncated: the file (0 bytes)"},
      {"no newline", std::string(4096, 'H'), "no header line in its first"},
      {"binary", std::string("\x01\xff\n\0\0", 5) + payload, "not a commit header"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    put(eight, c.bytes);
    const auto start = std::chrono::steady_clock::now();
    std::int64_t newest = -1;
    const auto skipped = skipped_by(store, &newest);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(newest == 7);
    REQUIRE(skipped.size() == 1);
    CHECK_THAT(skipped[0], Contains("'" + eight + "'") && Contains(c.expected) && Contains("falling back"));
    CHECK(seconds < 1.0);  // nothing the header claims is allocated or read
    std::string problem;
    CHECK_FALSE(store.read(8, &problem));
    CHECK_THAT(problem, Contains(c.expected));
  }
  // Every case above, through the in-memory parser the fuzz test drives, says the same.
  std::string problem;
  CHECK_FALSE(hvd::detail::parse_commit(cases[0].bytes, 8, &problem));
  CHECK_THAT(problem, Contains("bytes=99999999999999"));
  // A name path_of() would not give is not a commit file at all.
  put(dir + "/commit-9.hvdc", slurp(store.path_of(7)));
  put(dir + "/commit-00000000000000000000009.hvdc", slurp(store.path_of(7)));
  std::int64_t newest = -1;
  CHECK(skipped_by(store, &newest).size() == 1);  // only commit 8 again
  CHECK(newest == 7);
  auto seven = store.read(7);
  REQUIRE(seven);
  CHECK(seven->payload == "seven");
  run("rm -rf " + dir);
}

TEST_CASE("temporary files of writers that died are removed at the next commit", "[elastic][trust]") {
  const std::string dir = "/tmp/hvd-trust-stale-" + std::to_string(getpid());
  run("rm -rf " + dir);
  const CommitStore store(dir);
  store.write({1, 2, "one"});
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);  // a pid that no process has now
  const std::string dead = dir + "/.tmp-" + std::to_string(child) + "-12345-2";
  const std::string dead_old_format = dir + "/.tmp-" + std::to_string(child) + "-3";
  // This pid, another start time: a process that had this pid before (a relaunch in a container).
  const std::string reused = dir + "/.tmp-" + std::to_string(getpid()) + "-1-4";
  // pid 1 with its own start time is alive: its file stays.
  std::string init_start;
  {
    std::ifstream in("/proc/1/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), {});
    std::istringstream fields(stat.substr(stat.rfind(')') + 1));
    std::string f;
    for (int i = 3; i <= 22 && fields >> f; ++i) init_start = f;
  }
  const std::string live = dir + "/.tmp-1-" + init_start + "-5";
  for (const auto& p : {dead, dead_old_format, reused, live}) put(p, "half a commit");
  store.write({2, 2, "two"});
  CHECK(access(dead.c_str(), F_OK) != 0);
  CHECK(access(dead_old_format.c_str(), F_OK) != 0);
  CHECK(access(reused.c_str(), F_OK) != 0);
  CHECK(access(live.c_str(), F_OK) == 0);
  CHECK(store.newest_id() == 2);
  run("rm -rf " + dir);
}

TEST_CASE("a directory that is not this user's alone is refused, naming path, owner and mode", "[elastic][trust]") {
  const std::string tmp = shared_tmp("mode");
  setenv("TMPDIR", tmp.c_str(), 1);
  unsetenv("HOROVOD_ELASTIC_DIR");
  const std::string mine = tmp + "/horovodcpp-elastic-" + std::to_string(geteuid());
  const CommitStore store(hvd::detail::elastic_dir("job"));
  CHECK(store.dir() == mine + "/job");
  store.write({1, 1, "one"});
  struct stat st {};
  REQUIRE(stat(mine.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);  // created private
  // This user's, but others may write it (as a careless chmod leaves it): refused.
  chmod(mine.c_str(), 0777);
  CHECK_THROWS_WITH(store.write({2, 1, "two"}), Contains("'" + mine + "' can be written by other users") &&
                                                    Contains("mode 0777") && Contains("owner uid " + std::to_string(geteuid())));
  CHECK_THROWS_WITH(store.newest_id(), Contains("can be written by other users"));
  chmod(mine.c_str(), 0700);
  CHECK(store.newest_id() == 1);
  // A symlink where the per-user directory goes (to a directory this user owns, even) is refused.
  run("rm -rf " + mine);
  const std::string elsewhere = tmp + "/elsewhere";
  ::mkdir(elsewhere.c_str(), 0700);
  REQUIRE(symlink(elsewhere.c_str(), mine.c_str()) == 0);
  CHECK_THROWS_WITH(store.write({3, 1, "three"}), Contains("'" + mine + "' is a symbolic link"));
  unsetenv("TMPDIR");
  run("rm -rf " + tmp);
}

TEST_CASE("a second user plants the store directory first: refused, nothing of it is read", "[elastic][trust]") {
  const std::string why = no_second_user();
  if (!why.empty()) {
    WARN("skipped: " << why);
    return;
  }
  const std::string tmp = shared_tmp("planted-dir");
  setenv("TMPDIR", tmp.c_str(), 1);
  unsetenv("HOROVOD_ELASTIC_DIR");
  const std::string mine = tmp + "/horovodcpp-elastic-" + std::to_string(geteuid());
  const std::string victim = tmp + "/victim";
  put(victim, "the job's own file");
  // The other user makes the directory (0755, its own), a commit 1000 in it, and symlinks where
  // commit files and temporary files would go, all pointing at the victim.
  as_nobody("mkdir -m 0755 " + mine + " && mkdir -m 0777 " + mine + "/job && printf \"HVDCOMMIT1 id=1000 size=2 "
            "bytes=0 fnv1a=cbf29ce484222325\\n\" > " + mine + "/job/commit-000000001000.hvdc && ln -s " + victim +
            " " + mine + "/job/commit-000000000001.hvdc && for i in 1 2 3; do ln -s " + victim + " " + mine +
            "/job/.tmp-$i; done");
  const CommitStore store(hvd::detail::elastic_dir("job"));
  const std::string expected = "'" + mine + "' belongs to another user (owner uid 65534, mode 0755";
  CHECK_THROWS_WITH(store.newest_id(), Contains(expected));
  CHECK_THROWS_WITH(store.read(1000), Contains(expected));
  CHECK_THROWS_WITH(store.write({1, 2, "mine"}), Contains(expected) && Contains("HOROVOD_ELASTIC_DIR"));
  CHECK(slurp(victim) == "the job's own file");
  // The job's own directory elsewhere is unaffected.
  const std::string own = tmp + "/own";
  setenv("HOROVOD_ELASTIC_DIR", own.c_str(), 1);
  const CommitStore chosen(hvd::detail::elastic_dir("job"));
  chosen.write({1, 2, "mine"});
  CHECK(chosen.newest_id() == 1);
  unsetenv("HOROVOD_ELASTIC_DIR");
  unsetenv("TMPDIR");
  run("rm -rf " + tmp);
}

TEST_CASE("a second user's commit file in the store is skipped for the job's own", "[elastic][trust]") {
  const std::string why = no_second_user();
  if (!why.empty()) {
    WARN("skipped: " << why);
    return;
  }
  const std::string tmp = shared_tmp("planted-commit");
  const CommitStore store(tmp + "/store");
  store.write({3, 2, "the job's commit 3"});
  // The other user writes a well-formed commit 1000 (a copy of commit 3 under another id) in a
  // directory of its own; it ends up in the store with its owner (as a move, or a once-careless
  // mode, would leave it).
  const CommitStore theirs(tmp + "/theirs");
  theirs.write({1000, 2, "resume from me"});
  REQUIRE(run("chown -R 65534:65534 " + theirs.dir()) == 0);
  as_nobody("cp -p " + theirs.path_of(1000) + " " + tmp + "/commit-000000001000.hvdc");
  REQUIRE(run("mv " + tmp + "/commit-000000001000.hvdc " + store.path_of(1000)) == 0);
  std::int64_t newest = -1;
  const auto skipped = skipped_by(store, &newest);
  CHECK(newest == 3);
  REQUIRE(skipped.size() == 1);
  CHECK_THAT(skipped[0], Contains("'" + store.path_of(1000) + "': it belongs to uid 65534, not to this user (uid 0)"));
  auto own = store.read(3);
  REQUIRE(own);
  CHECK(own->payload == "the job's commit 3");
  run("rm -rf " + tmp);
}

TEST_CASE("a symlink where the temporary commit file goes is refused; nothing is written through it",
          "[elastic][trust]") {
  const std::string tmp = shared_tmp("planted-link");
  const CommitStore store(tmp + "/store");
  store.write({4, 2, "four"});
  const std::string victim = tmp + "/victim";
  put(victim, "the job's own file");
  const std::string link = store.temp_path(5);
  const std::string why = no_second_user();
  if (why.empty()) {
    // Made by the other user in a directory it may write, then put in place as it stands.
    as_nobody("ln -s " + victim + " " + tmp + "/link");
    REQUIRE(run("mv " + tmp + "/link " + link) == 0);
  } else {
    WARN("the link is made by this user: " << why);
    REQUIRE(symlink(victim.c_str(), link.c_str()) == 0);
  }
  CHECK_THROWS_WITH(store.write({5, 2, "five"}),
                    Contains("cannot create '" + link + "': something is already there") &&
                        Contains("nothing was written through it"));
  CHECK(slurp(victim) == "the job's own file");
  CHECK(store.newest_id() == 4);
  auto four = store.read(4);
  REQUIRE(four);
  CHECK(four->payload == "four");
  run("rm -rf " + tmp);
}
