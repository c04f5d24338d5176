// Finding the failed rank in mpirun's (Open MPI 4.1) and srun's messages, fed in odd chunks.
#include <catch2/catch.hpp>

#include "rank_report.h"

using namespace hvd::launcher;

namespace {

std::optional<FailedRank> scan(const std::string& text, std::size_t chunk = 7) {
  RankReportScanner scanner;
  for (std::size_t i = 0; i < text.size(); i += chunk)
    scanner.feed(text.data() + i, std::min(chunk, text.size() - i));
  return scanner.failed();
}

const char* kExitCode =
    "--------------------------------------------------------------------------\n"
    "Primary job  terminated normally, but 1 process returned\n"
    "a non-zero exit code. Per user-direction, the job has been aborted.\n"
    "--------------------------------------------------------------------------\n"
    "--------------------------------------------------------------------------\n"
    "mpirun detected that one or more processes exited with non-zero status, thus causing\n"
    "the job to be terminated. The first process to do so was:\n"
    "\n"
    "  Process name: [[23593,1],2]\n"
    "  Exit code:    3\n"
    "--------------------------------------------------------------------------\n";

}  // namespace

TEST_CASE("a rank's exit code") {
  for (std::size_t chunk : {1, 7, 4096}) {
    auto f = scan(kExitCode, chunk);
    REQUIRE(f);
    CHECK(f->rank == 2);
    CHECK(f->exit_code == 3);
    CHECK(describe(*f) == "rank 2 exited with code 3");
  }
}

TEST_CASE("a rank killed by a signal, an improper exit, MPI_Abort") {
  auto killed = scan("mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed).\n");
  REQUIRE(killed);
  CHECK(killed->rank == 1);
  CHECK(killed->node == "vm");
  CHECK(killed->signal == 9);
  CHECK_THAT(describe(*killed), Catch::StartsWith("rank 1 (node vm) was killed by signal 9"));

  auto improper = scan("mpirun has exited due to process rank 3 with PID 0 on\nnode n2 exiting "
                       "improperly. There are three reasons this could occur:\n");
  REQUIRE(improper);
  CHECK(improper->rank == 3);
  CHECK(improper->improper_exit);
  CHECK(describe(*improper) == "rank 3 (node n2) exited without calling hvd::shutdown() (MPI_Finalize)");

  auto abort = scan("MPI_ABORT was invoked on rank 5 in communicator MPI_COMM_WORLD\nwith errorcode 17.\n");
  REQUIRE(abort);
  CHECK(abort->rank == 5);
  CHECK(describe(*abort) == "rank 5 called MPI_Abort with error code 17");
}

TEST_CASE("srun's reports") {
  auto f = scan("srun: error: nid0007: task 6: Exited with exit code 4\n");
  REQUIRE(f);
  CHECK(f->rank == 6);
  CHECK(f->exit_code == 4);
  CHECK(f->node == "nid0007");
  auto k = scan("srun: error: nid0001: task 2: Killed\n");
  REQUIRE(k);
  CHECK(k->rank == 2);
  CHECK(k->signal == 9);
}

TEST_CASE("rank output is not mistaken for mpirun's report; the first report wins") {
  CHECK_FALSE(scan("[1,0]<stderr>:  Process name: [[1,1],0]  Exit code: 9\n"));
  CHECK_FALSE(scan("0: srun: error: n: task 1: Exited with exit code 2\n"));
  CHECK_FALSE(scan("all good\n"));
  auto f = scan(std::string("mpirun noticed that process rank 4 with PID 0 on node a exited on "
                            "signal 15 (Terminated).\n") + kExitCode);
  REQUIRE(f);
  CHECK(f->rank == 4);
}

namespace {

// What Open MPI 4.1.4 printed on stderr here for each case (recorded with mpirun --tag-output;
// its "N total processes failed to start" goes to stdout, which hvdrun does not read).
const char* kAllFailedAtOnce =
    "[1,0]<stderr>:prog: error while loading shared libraries: libx.so\n"
    "[1,1]<stderr>:prog: error while loading shared libraries: liby.so\n"
    "[1,1]<stdout>:not an error\n"
    "--------------------------------------------------------------------------\n"
    "Primary job  terminated normally, but 1 process returned\n"
    "a non-zero exit code. Per user-direction, the job has been aborted.\n"
    "--------------------------------------------------------------------------\n";

const char* kNotFound =
    "--------------------------------------------------------------------------\n"
    "mpirun was unable to find the specified executable file, and therefore\n"
    "did not launch the job.  This error was first reported for process\n"
    "rank 0; it may have occurred for other processes as well.\n"
    "\n"
    "Node:       vm\n"
    "Executable: nosuchprog\n"
    "--------------------------------------------------------------------------\n";

const char* kNotExecutable =
    "--------------------------------------------------------------------------\n"
    "mpirun was unable to launch the specified application as it could not access\n"
    "or execute an executable:\n"
    "\n"
    "Executable: /tmp/garbage\n"
    "Node: vm\n"
    "\n"
    "while attempting to start process rank 0.\n"
    "--------------------------------------------------------------------------\n";

const char* kExecFailed =
    "--------------------------------------------------------------------------\n"
    "Open MPI tried to fork a new process via the \"execve\" system call but\n"
    "failed.  Open MPI checks many things before attempting to launch a\n"
    "abort.\n"
    "\n"
    "  Local host:        vm\n"
    "  Working dir:       /tmp/my dir\n"
    "  Application name:  /tmp/garbage\n"
    "  Error:             Exec format error\n"
    "--------------------------------------------------------------------------\n"
    "--------------------------------------------------------------------------\n"
    "mpirun was unable to start the specified application as it encountered an\n"
    "error:\n"
    "\n"
    "Error code: -125\n"
    "Error name: The specified application failed to start\n"
    "Node: vm\n"
    "--------------------------------------------------------------------------\n";

const char* kNoDaemons =
    "ssh: connect to host n2 port 22: Connection refused\n"
    "--------------------------------------------------------------------------\n"
    "ORTE was unable to reliably start one or more daemons.\n"
    "This usually is caused by:\n"
    "\n"
    "* not finding the required libraries and/or binaries on\n"
    "  one or more nodes. Please check your PATH and LD_LIBRARY_PATH\n"
    "--------------------------------------------------------------------------\n";

LaunchReport report_of(const std::string& text) {
  RankReportScanner scanner;
  for (std::size_t i = 0; i < text.size(); i += 5)
    scanner.feed(text.data() + i, std::min<std::size_t>(5, text.size() - i));
  return scanner.report();
}

}  // namespace

TEST_CASE("a named rank: the summary says so and that the launcher ended the others") {
  auto r = report_of(kExitCode);
  REQUIRE(r.failed);
  CHECK(failure_summary(r, "mpirun", 3) ==
        "rank 2 exited with code 3; mpirun ended the other ranks; exit code 3");
}

TEST_CASE("nothing printed: no rank is claimed") {
  auto r = report_of("");
  CHECK_FALSE(r.failed);
  CHECK(r.notes.empty());
  CHECK(failure_summary(r, "mpirun", 1) == "mpirun exited with code 1 without naming a failed rank");
}

TEST_CASE("every rank failing at once: each rank's last error line is named") {
  auto r = report_of(kAllFailedAtOnce);
  CHECK_FALSE(r.failed);
  CHECK(r.last_error_line == std::map<int, std::string>{
                                 {0, "prog: error while loading shared libraries: libx.so"},
                                 {1, "prog: error while loading shared libraries: liby.so"}});
  CHECK(failure_summary(r, "mpirun", 127) ==
        "mpirun exited with code 127 without naming a failed rank; mpirun said: 1 process(es) "
        "returned a non-zero exit code; last error output: rank 0: 'prog: error while loading "
        "shared libraries: libx.so'; rank 1: 'prog: error while loading shared libraries: "
        "liby.so'");
}

TEST_CASE("a program mpirun cannot find or execute, daemons that never started") {
  CHECK(failure_summary(report_of(kNotFound), "mpirun", 134) ==
        "mpirun exited with code 134 without naming a failed rank; mpirun said: program "
        "'nosuchprog' not found on node vm");
  CHECK(failure_summary(report_of(kNotExecutable), "mpirun", 132) ==
        "mpirun exited with code 132 without naming a failed rank; mpirun said: program "
        "'/tmp/garbage' could not be executed on node vm");
  CHECK(failure_summary(report_of(kExecFailed), "mpirun", 131) ==
        "mpirun exited with code 131 without naming a failed rank; mpirun said: program "
        "'/tmp/garbage' could not be executed on node vm: Exec format error; Error name: The "
        "specified application failed to start");
  CHECK(failure_summary(report_of(kNoDaemons), "mpirun", 255) ==
        "mpirun exited with code 255 without naming a failed rank; mpirun said: its daemons did "
        "not start on one or more hosts (check ssh to every host and that Open MPI is installed "
        "there); ssh: connect to host n2 port 22: Connection refused");
}

TEST_CASE("srun: task stderr lines and srun's own errors") {
  auto r = report_of("3: Traceback: boom\n12: fatal: no GPU\n"
                     "srun: error: Unable to create step for job 42: Invalid generic resource\n");
  CHECK_FALSE(r.failed);
  CHECK(failure_summary(r, "srun", 1) ==
        "srun exited with code 1 without naming a failed rank; srun said: srun: error: Unable to "
        "create step for job 42: Invalid generic resource; last error output: rank 3: "
        "'Traceback: boom'; rank 12: 'fatal: no GPU'");
}

TEST_CASE("many ranks: four are shown, the rest counted; long lines are cut") {
  std::string text;
  for (int r = 0; r < 7; ++r) text += "[1," + std::to_string(r) + "]<stderr>:err " + std::to_string(r) + "\n";
  text += "[1,0]<stderr>:" + std::string(500, 'x') + "\n";
  auto r = report_of(text);
  CHECK(r.last_error_line.size() == 7);
  CHECK(r.last_error_line.at(0) == std::string(200, 'x') + "...");
  const std::string summary = failure_summary(r, "mpirun", 2);
  CHECK_THAT(summary, Catch::Contains("; rank 3: 'err 3' (and 3 more ranks)"));
  CHECK_THAT(summary, !Catch::Contains("err 4"));
  // A rank number too large for an int is not a rank line (and does not throw).
  CHECK(report_of("[1,99999999999]<stderr>:x\n").last_error_line.empty());
}
