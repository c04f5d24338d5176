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
