// Files horovodcpp writes at a path it was given (Note [Output files are never followed through
// links], timeline/output_file.h): a symlink there, dangling or not, a hard link, a file another
// user owns or a FIFO are refused with a message naming the path, and the file they point at is
// untouched; a fresh path and this user's own file are written. The planted things are made by
// uid 65534 through setpriv when running as root (as CI does); otherwise by this user, saying so.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "timeline/output_file.h"
#include "core/parameter_manager.h"

using hvd::detail::open_output_file;
using Catch::Matchers::Contains;

namespace {

constexpr const char* kNobody = "setpriv --reuid=65534 --regid=65534 --clear-groups";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// A scratch directory like /tmp (world-writable, sticky) with a victim file in it.
struct Scratch {
  std::string dir = "/tmp/hvd-output-" + std::to_string(getpid());
  std::string victim = dir + "/victim";
  bool second_user = false;
  Scratch() {
    std::system(("rm -rf " + dir).c_str());
    ::mkdir(dir.c_str(), 0700);
    ::chmod(dir.c_str(), 01777);
    std::ofstream(victim) << "the job's own file";
    second_user = geteuid() == 0 && std::system((std::string(kNobody) + " true >/dev/null 2>&1").c_str()) == 0;
  }
  ~Scratch() { std::system(("rm -rf " + dir).c_str()); }
  // Runs a shell command as the other user when there can be one, else as this user.
  void plant(const std::string& command) const {
    if (!second_user) WARN("no second user here (not root, or setpriv fails): planting as this user");
    const std::string prefix = second_user ? std::string(kNobody) + " " : "";
    REQUIRE(std::system((prefix + "sh -c '" + command + "'").c_str()) == 0);
  }
};

std::string refusal(const std::string& path) {
  std::string why;
  const int fd = open_output_file(path, &why);
  if (fd >= 0) {
    ::close(fd);
    return "opened";
  }
  return why;
}

}  // namespace

TEST_CASE("an output file is never opened through a link, nor over a file that is not this user's", "[output]") {
  Scratch s;
  s.plant("ln -s " + s.victim + " " + s.dir + "/link && ln -s " + s.dir + "/nowhere " + s.dir + "/dangling");
  CHECK_THAT(refusal(s.dir + "/link"), Contains("'" + s.dir + "/link' is a symbolic link"));
  CHECK_THAT(refusal(s.dir + "/dangling"), Contains("'" + s.dir + "/dangling' is a symbolic link"));
  CHECK(access((s.dir + "/nowhere").c_str(), F_OK) != 0);  // not created through the dangling link
  REQUIRE(::link(s.victim.c_str(), (s.dir + "/hard").c_str()) == 0);
  CHECK_THAT(refusal(s.dir + "/hard"), Contains("'" + s.dir + "/hard' already exists and it has 2 hard links"));
  REQUIRE(::mkfifo((s.dir + "/fifo").c_str(), 0666) == 0);
  CHECK_THAT(refusal(s.dir + "/fifo"), Contains("is not a regular file"));  // and the open did not block
  if (s.second_user) {
    s.plant("echo theirs > " + s.dir + "/theirs && chmod 666 " + s.dir + "/theirs");
    CHECK_THAT(refusal(s.dir + "/theirs"), Contains("'" + s.dir + "/theirs' already exists and it is owned by uid 65534"));
    CHECK(slurp(s.dir + "/theirs") == "theirs\n");
  }
  CHECK(slurp(s.victim) == "the job's own file");
  // A fresh path, and this user's own earlier file (truncated), are fine.
  std::string why;
  for (int round = 0; round < 2; ++round) {
    const int fd = open_output_file(s.dir + "/mine", &why);
    REQUIRE(fd >= 0);
    CHECK(hvd::detail::write_all(fd, "abc", round == 0 ? 3 : 1));
    ::close(fd);
  }
  CHECK(slurp(s.dir + "/mine") == "a");
}

TEST_CASE("HOROVOD_AUTOTUNE_LOG through a symlink is refused, naming the variable and the path", "[output][autotune]") {
  Scratch s;
  s.plant("ln -s " + s.victim + " " + s.dir + "/tune.csv");
  hvd::detail::AutotuneOptions options;
  options.log_path = s.dir + "/tune.csv";
  CHECK_THROWS_WITH(hvd::detail::ParameterManager(options, {65536, 1, true}),
                    Contains("HOROVOD_AUTOTUNE_LOG='" + s.dir + "/tune.csv' is a symbolic link"));
  CHECK(slurp(s.victim) == "the job's own file");
}
