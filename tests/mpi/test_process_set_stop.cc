// A process set whose negotiation fails stops every rank promptly, each with the set's reason,
// rather than stopping the set's members and leaving the other ranks waiting (for
// HOROVOD_LIVENESS_TIMEOUT_SECONDS, 30 minutes by default) or telling them only that the members
// "shut down". See Note [A failed process set stops every rank] (core/cycle.h). np=4, the sets
// {0, 1}, {2, 3} and {1, 2}: the last one needs rank 1 in its round of the cycle in which {0, 1}
// fails, after that set's round. One case per run (the runtime stops):
//  [mpi_error]  the set's control channel reports an MPI error. It comes from outside the
//     library: this program interposes MPI_Ibcast and MPI_Test (the MPI profiling interface;
//     libhorovodcpp's calls resolve to the definitions here first) and makes a completed byte
//     broadcast fail when it carried kPoisonName. That broadcast is the response list of the one
//     set the tensor was submitted in, so every member of that set sees the same MPI error in
//     the same round, as with a communicator that broke, and no other set does.
//  [stall]  a tensor of the set stalls past HOROVOD_STALL_SHUTDOWN_TIME_SECONDS (set by ctest).
//  [one_sided]  as [mpi_error], but only rank 1 sees the error: rank 0 goes on into the set's
//     allreduce and waits there for rank 1, where no round reaches it; rank 1 must tell every
//     rank itself (the liveness channel), long before the liveness timeout (30 minutes).
//  [slow_member]  as [mpi_error] (both members see the error), but rank 1 then spends
//     kSlowFor in its next round, {1, 2}'s (this program delays its next MPI_Iallreduce, as a
//     peer busy in a long collective of {2, 3} would): the next global round comes late, past the
//     2 s grace of a one-sided failure, and must still stop every rank in order.
//  [two_sets]  {0, 1} and {2, 3} both fail in the same cycle (rank 0 holds the cycle's start,
//     interposed MPI_Send, until every rank has submitted): every rank stops with both reasons.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <mpi.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <horovodcpp/horovod.h>

#include "test_support.h"
#include "tests/common/rank_markers.h"

namespace {

constexpr const char* kPoisonName = "poisoned.negotiation";

struct Broadcast {
  const void* buffer;
  int count;
};
std::mutex g_broadcasts_mutex;
std::map<MPI_Request, Broadcast> g_broadcasts;  // byte broadcasts in flight
std::atomic<int> g_failing_rank{-1};  // the only rank whose poisoned broadcast fails; -1: every rank
std::atomic<bool> g_slow_next{false};  // [slow_member]: this rank's next MPI_Iallreduce waits kSlowFor
std::atomic<bool> g_slowed{false};     // it did
int g_slow_rank = -1;
constexpr auto kSlowFor = std::chrono::seconds(4);
// [two_sets]: rank 0's cycle starts wait while this is set. kStartTag is the control channel's
// "cycle N starts" (backends/mpi/mpi_control_channel.cc), sent by rank 0 with MPI_Send.
constexpr int kStartTag = 7002;
std::atomic<bool> g_hold_starts{false};
std::atomic<int> g_starts_held{0};

bool carries_poison(const Broadcast& b) {
  const std::size_t n = std::strlen(kPoisonName);
  return b.count > 0 && memmem(b.buffer, static_cast<std::size_t>(b.count), kPoisonName, n) != nullptr;
}

}  // namespace

extern "C" int MPI_Ibcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
                          MPI_Request* request) {
  const int rc = PMPI_Ibcast(buffer, count, datatype, root, comm, request);
  if (rc == MPI_SUCCESS && datatype == MPI_BYTE) {
    std::lock_guard<std::mutex> lock(g_broadcasts_mutex);
    g_broadcasts[*request] = {buffer, count};
  }
  return rc;
}

extern "C" int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  const MPI_Request started = *request;
  const int rc = PMPI_Test(request, flag, status);
  if (rc != MPI_SUCCESS || !*flag) return rc;
  std::lock_guard<std::mutex> lock(g_broadcasts_mutex);
  const auto it = g_broadcasts.find(started);
  if (it == g_broadcasts.end()) return rc;
  bool poisoned = carries_poison(it->second);
  g_broadcasts.erase(it);
  if (poisoned && g_failing_rank.load() >= 0) {
    int rank = -1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    poisoned = rank == g_failing_rank.load();
  }
  if (poisoned && g_slow_rank >= 0) {
    int rank = -1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == g_slow_rank) g_slow_next = true;
  }
  return poisoned ? MPI_ERR_OTHER : rc;
}

extern "C" int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                              MPI_Comm comm, MPI_Request* request) {
  if (g_slow_next.exchange(false)) {
    std::this_thread::sleep_for(kSlowFor);
    g_slowed = true;
  }
  return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
}

extern "C" int MPI_Send(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  if (tag == kStartTag && g_hold_starts.load()) {
    ++g_starts_held;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (g_hold_starts.load() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return PMPI_Send(buf, count, datatype, dest, tag, comm);
}

namespace {

using hvd::DataType;
using hvd::HostTensor;
using hvd::ProcessSet;
using hvd::test::filled;
using hvd::test::read_as_double;
using Clock = std::chrono::steady_clock;

ProcessSet g_low({0, 1}), g_high({2, 3}), g_middle({1, 2});

// How long any rank may take to learn of the failure: cycles are milliseconds apart.
constexpr auto kPatience = std::chrono::seconds(20);

int me() { return hvd::rank(); }

std::shared_ptr<HostTensor> ramp(int n) {
  const int r = me();
  return filled(DataType::Float32, {n}, [r](std::int64_t i) { return (r + 1) * static_cast<double>(i); });
}

hvd::AllreduceOptions sum_in(const ProcessSet& set, const std::string& name) {
  hvd::AllreduceOptions o;
  o.op = hvd::ReduceOp::Sum;
  o.name = name;
  o.process_set = set;
  return o;
}

// Submits an allreduce of `t` and waits at most kPatience for it; returns its error (from the
// submission or the handle), "" on success, or "still waiting".
std::string outcome(const std::shared_ptr<HostTensor>& t, const hvd::AllreduceOptions& options) {
  try {
    const hvd::Handle h = hvd::allreduce_async(t, t, options);
    const auto until = Clock::now() + kPatience;
    while (!h.poll()) {
      if (Clock::now() > until) return "still waiting";
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    h.wait();
  } catch (const hvd::Error& e) {
    return e.what();
  }
  return "";
}

// Rank 0 (and rank 1 unless `stall`: then it only waits for the stop) submits `name` in {0, 1};
// ranks 2 and 3 reduce in {2, 3} meanwhile, and (unless `stall`: it would stall too) rank 2
// waits in {1, 2} for rank 1, which never submits there. Every rank must stop within kPatience
// with an error that contains `reason`, on every pending and later operation, and every result
// before the stop is exact. `orderly`: the stop comes from a global round, whose error names the
// pending tensor; a watchdog that ends the collectives fails it with the reason only.
void expect_every_rank_stops(const std::string& name, bool stall, const std::string& reason, bool orderly = true) {
  const std::string shared_prefix = orderly ? "ranks 0, 1 stopped; rank 0: " : "";
  REQUIRE(hvd::size() == 4);
  {  // The job works before.
    auto t = ramp(5);
    REQUIRE(outcome(t, sum_in(hvd::global_process_set(), "before")) == "");
    for (int i = 0; i < 5; ++i) REQUIRE(read_as_double(*t, i) == Approx(10.0 * i));
  }
  auto pending = ramp(2);
  hvd::Handle pending_handle;
  if (me() == 2 && !stall) pending_handle = hvd::allreduce_async(pending, pending, sum_in(g_middle, "middle.pending"));
  const auto start = Clock::now();
  std::string e;
  if (me() == 0 || (me() == 1 && !stall)) {
    e = outcome(ramp(4), sum_in(g_low, name));
  } else if (me() == 1) {
    // Nothing of it waits: it learns of the stop by polling, and then from its next operation.
    while (hvd::is_initialized() && Clock::now() - start < kPatience)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    e = outcome(ramp(4), sum_in(g_low, "late"));
  } else {
    // {2, 3} reduces until the failure reaches it: every result before is exact.
    for (int step = 0; e.empty() && Clock::now() - start < kPatience; ++step) {
      auto t = ramp(8);
      e = outcome(t, sum_in(g_high, "busy." + std::to_string(step)));
      if (e.empty())
        for (int i = 0; i < 8; ++i) REQUIRE(read_as_double(*t, i) == Approx(7.0 * i));
    }
  }
  INFO(e);
  // Orderly: the same message on every rank, the global round's (the lowest failing rank's reason).
  CHECK_THAT(e, Catch::Contains(shared_prefix + reason));
  if (orderly) CHECK_THAT(e, !Catch::Contains("ending this rank's collectives"));
  CHECK(Clock::now() - start < kPatience);
  if (pending_handle.valid()) {
    // Failed by the same stop as `e`'s operation, maybe a moment later.
    const auto until = Clock::now() + std::chrono::seconds(5);
    while (!pending_handle.poll() && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    REQUIRE(pending_handle.poll());
    std::string m;
    try {
      pending_handle.wait();
    } catch (const hvd::Error& error) {
      m = error.what();
    }
    INFO(m);
    CHECK_THAT(m, Catch::Contains(shared_prefix + reason));
    if (orderly) CHECK_THAT(m, Catch::Contains("'middle.pending'"));
  }
  // Every rank has stopped, with the reason: a later collective fails at once.
  const std::string after = outcome(ramp(3), sum_in(hvd::global_process_set(), "after"));
  INFO(after);
  CHECK_THAT(after, Catch::Contains("horovodcpp has stopped") && Catch::Contains(shared_prefix + reason));
  CHECK_FALSE(hvd::is_initialized());
}

}  // namespace

TEST_CASE("an MPI error in the negotiation of {0, 1} stops every rank, naming the set and the error", "[mpi_error]") {
  expect_every_rank_stops(kPoisonName, false,
                          "negotiation in process set 1 (ranks [0, 1]) failed: MPI_Test failed: MPI_ERR_OTHER");
}

// Rank 0 waits inside the set's allreduce of kPoisonName for rank 1, which failed before it: only
// rank 1's own report reaches rank 0 there. See Note [A failed process set stops every rank].
TEST_CASE("an MPI error in the negotiation of {0, 1} on rank 1 only stops every rank with rank 1's reason", "[one_sided]") {
  g_failing_rank = 1;
  expect_every_rank_stops(kPoisonName, false,
                          "negotiation in process set 1 (ranks [0, 1]) failed: MPI_Test failed: MPI_ERR_OTHER", false);
}

// Both members see the error; rank 1 then waits kSlowFor in {1, 2}'s round, so the global round
// that stops every rank in order comes after the grace for a one-sided failure. Each member knows
// the other saw the failure too (nobody waits in the set's collective): no rank may take the
// watchdog's way out, and the job ends in order (every rank finalizes: mpirun's status is 0).
TEST_CASE("a failure of {0, 1} on both members stops every rank in order even when rank 1 comes late", "[slow_member]") {
  g_slow_rank = 1;
  expect_every_rank_stops(kPoisonName, false,
                          "negotiation in process set 1 (ranks [0, 1]) failed: MPI_Test failed: MPI_ERR_OTHER");
  if (me() == 1) CHECK(g_slowed.load());
}

// {0, 1} and {2, 3} negotiate kPoisonName in the same cycle and fail there on every member: every
// rank stops with the same message, both sets' reasons in rank order.
TEST_CASE("two sets failing in the same cycle stop every rank with the same reasons", "[two_sets]") {
  REQUIRE(hvd::size() == 4);
  // A folder every rank knows (rank 0's pid, the job works before), for the markers with which
  // the user threads agree when every submission is queued: no MPI call of the test's own while
  // the runtime runs (MPI's progress would touch the background thread's requests).
  auto pid = filled(DataType::Float64, {1}, [](std::int64_t) { return me() == 0 ? static_cast<double>(getpid()) : 0.0; });
  REQUIRE(outcome(pid, sum_in(hvd::global_process_set(), "before")) == "");
  const std::string dir = "/tmp/hvd_two_sets." + std::to_string(static_cast<long long>(read_as_double(*pid, 0)));
  mkdir(dir.c_str(), 0700);  // every rank; the first one makes it
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  PMPI_Error_string(MPI_ERR_OTHER, text, &length);
  const std::string mpi_error = "MPI_Test failed: " + std::string(text, length);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // no cycle in progress
  if (me() == 0) g_hold_starts = true;
  hvd::test::mark_and_wait_for_ranks(dir + "/armed.", me(), 4, std::chrono::seconds(20));
  auto t = ramp(4);
  const hvd::Handle h = hvd::allreduce_async(t, t, sum_in(me() < 2 ? g_low : g_high, kPoisonName));
  hvd::test::mark_and_wait_for_ranks(dir + "/submitted.", me(), 4, std::chrono::seconds(20));
  if (me() == 0) {
    // Rank 0 has asked to start the cycle that pops every rank's submission (rank 0's own asks
    // for it): let it go only once that start is held, so that no earlier start pops a part.
    const auto until = Clock::now() + std::chrono::seconds(10);
    while (g_starts_held.load() == 0 && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CHECK(g_starts_held.load() > 0);
    g_hold_starts = false;
  }
  std::string e;
  const auto until = Clock::now() + kPatience;
  while (!h.poll() && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  REQUIRE(h.poll());
  try {
    h.wait();
  } catch (const hvd::Error& error) {
    e = error.what();
  }
  // Each set's reason once, at its lowest rank, in rank order: the very same text on every rank.
  const std::string reasons = "ranks 0, 1, 2, 3 stopped; rank 0: negotiation in process set 1 (ranks [0, 1]) failed: " +
                              mpi_error + "; rank 2: negotiation in process set 2 (ranks [2, 3]) failed: " + mpi_error;
  CHECK(e == "horovodcpp shut down before ALLREDUCE of tensor '" + std::string(kPoisonName) + "' completed: " + reasons);
  const std::string after = outcome(ramp(3), sum_in(hvd::global_process_set(), "after"));
  CHECK(after == "hvd::allreduce: horovodcpp has stopped: " + reasons);
  CHECK_FALSE(hvd::is_initialized());
  hvd::test::mark_and_wait_for_ranks(dir + "/done.", me(), 4, std::chrono::seconds(20));
  // Rank 0 removes the folder once every rank is past that wait (says so with "gone.R").
  if (me() == 0) {
    hvd::test::mark_and_wait_for_ranks(dir + "/gone.", 0, 4, std::chrono::seconds(20));
    std::filesystem::remove_all(dir);
  } else {
    std::ofstream(dir + "/gone." + std::to_string(me())) << me() << "\n";
  }
}

TEST_CASE("a stall in {0, 1} past the shutdown time stops every rank, naming the tensor and the set", "[stall]") {
  // Rank 1 is the one the stall inspector names: it never submits 'stalled'.
  expect_every_rank_stops("stalled", true,
                          "stall shutdown after HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=2: tensor 'stalled' in process "
                          "set 1 (ranks [0, 1]) was submitted by some ranks but not by rank 1");
}

int main(int argc, char** argv) {
  hvd::init({g_low, g_high, g_middle});
  const int me_at_start = hvd::rank();
  std::fprintf(stderr, "rank %d of %d starting the process set stop tests\n", hvd::rank(), hvd::size());
  Catch::Session session;
  const int failed = session.run(argc, argv);
  hvd::shutdown();
  // every_rank_passes.sh counts these: a rank left in a collective cannot finalize MPI, so the
  // job's exit status says nothing in [one_sided], and the first rank to exit ends the job.
  if (failed == 0) std::printf("rank %d: passed\n", me_at_start);
  std::fflush(stdout);
  if (const char* dir = std::getenv("HVD_TEST_DIR"))
    hvd::test::mark_and_wait_for_ranks(std::string(dir) + "/done.", me_at_start, 4, std::chrono::seconds(30));
  return failed == 0 ? 0 : 1;
}
