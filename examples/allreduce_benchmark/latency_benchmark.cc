// latency_benchmark: the synchronous small operations a training loop makes every step (a loss
// averaged over the ranks, a flag broadcast from rank 0, a barrier), each waited for before the
// next, through horovodcpp beside the same call in raw MPI, in one launch:
//   allreduce  4 bytes (one float32, sum)   allreduce_async(t, t).wait()  vs MPI_Allreduce
//   broadcast  4 bytes (one float32, root 0) broadcast_async(t, t).wait() vs MPI_Bcast
//   barrier                                  hvd::barrier()              vs MPI_Barrier
// Raw MPI runs on a duplicate of MPI_COMM_WORLD beside the runtime (bench_common.h: Session).
//
//   mpirun -np 2 ./latency_benchmark [--rounds 5] [--seconds 0.2] [--warmup 20]
//
// Every peer's result is checked first (sum = n(n+1)/2, broadcast = root's value, a barrier
// holds every rank until the last one arrives). Then `rounds` rounds run raw and ours in turn for
// each operation; a round times back-to-back operations for about `seconds` after a barrier and
// keeps the slowest rank's time per operation; the table shows the median round.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <horovodcpp/horovod.h>

#include "bench_common.h"

namespace {

using hvd::bench::fixed;

// Command-line settings, read once by main.
struct Config {
  int rounds = 5, warmup = 20;
  double seconds = 0.2;  // per peer per operation per round
};

// Issue 14's goal: a synchronous 4-byte allreduce costs at most this many raw MPI_Allreduces.
constexpr double kAllreduceGoal = 100;

// One way of doing one operation once (raw MPI or ours), on the operation's 4-byte value.
struct Peer {
  std::string name;
  std::function<void()> run_once;
};

// One synchronous operation: its raw and ours peers and the check both must pass.
struct Operation {
  std::string label, raw_call;
  Peer raw, ours;
  // Runs `peer` once on checkable input; returns a message if this rank saw a wrong result.
  std::function<std::string(const Peer&)> check;
};

// Seconds per operation for `iters` back-to-back runs, slowest rank (the same on every rank).
double time_batch(const Peer& peer, int iters, MPI_Comm comm) {
  hvd::bench::quiet_barrier(comm);
  const double start = hvd::bench::now_seconds();
  for (int i = 0; i < iters; ++i) peer.run_once();
  return hvd::bench::max_over_ranks(std::vector<double>{(hvd::bench::now_seconds() - start) / iters}, comm)[0];
}

// The three operations on `value` (one float32 this rank owns for the whole run).
std::vector<Operation> make_operations(const std::shared_ptr<hvd::HostTensor>& value, MPI_Comm comm, int rank,
                                       int size) {
  float* v = value->data_as<float>();
  std::vector<Operation> ops;

  Operation allreduce{"allreduce, 4 B float32 sum", "MPI_Allreduce", {}, {}, {}};
  allreduce.raw = {"raw", [v, comm] { MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_FLOAT, MPI_SUM, comm); }};
  allreduce.ours = {"ours", [value] {
                      hvd::allreduce_async(value, value, {hvd::ReduceOp::Sum, "latency_benchmark.allreduce"}).wait();
                    }};
  allreduce.check = [v, rank, size](const Peer& peer) -> std::string {
    *v = static_cast<float>(rank + 1);
    peer.run_once();
    const float expected = static_cast<float>(size * (size + 1) / 2);
    if (*v == expected) return "";
    return "sum of rank + 1 gave " + std::to_string(*v) + ", expected " + std::to_string(expected);
  };
  ops.push_back(allreduce);

  Operation broadcast{"broadcast, 4 B float32 from rank 0", "MPI_Bcast", {}, {}, {}};
  broadcast.raw = {"raw", [v, comm] { MPI_Bcast(v, 1, MPI_FLOAT, 0, comm); }};
  broadcast.ours = {"ours", [value] {
                      hvd::broadcast_async(value, value, {0, "latency_benchmark.broadcast", {}}).wait();
                    }};
  broadcast.check = [v, rank](const Peer& peer) -> std::string {
    *v = static_cast<float>(rank + 1);
    peer.run_once();
    if (*v == 1.0f) return "";
    return "broadcast of rank 0's 1.0 gave " + std::to_string(*v);
  };
  ops.push_back(broadcast);

  Operation barrier{"barrier", "MPI_Barrier", {}, {}, {}};
  barrier.raw = {"raw", [comm] { MPI_Barrier(comm); }};
  barrier.ours = {"ours", [] { hvd::barrier(); }};
  // The last rank arrives 50 ms late: every other rank must be held for most of that.
  barrier.check = [rank, size](const Peer& peer) -> std::string {
    constexpr double kLate = 0.05;
    if (rank == size - 1) std::this_thread::sleep_for(std::chrono::duration<double>(kLate));
    const double start = hvd::bench::now_seconds();
    peer.run_once();
    const double held = hvd::bench::now_seconds() - start;
    if (rank == size - 1 || held >= 0.8 * kLate) return "";
    return "returned after " + fixed(held * 1e3, 1) + " ms although rank " + std::to_string(size - 1) +
           " arrived " + fixed(kLate * 1e3, 0) + " ms late";
  };
  ops.push_back(barrier);
  return ops;
}

// Runs every check on every rank; throws naming the operation, the peer and the ranks that saw
// a wrong result.
void check_all(const std::vector<Operation>& ops, MPI_Comm comm, int rank) {
  for (const auto& op : ops) {
    for (const Peer* peer : {&op.raw, &op.ours}) {
      hvd::bench::quiet_barrier(comm);
      const std::string problem = op.check(*peer);
      const auto wrong = hvd::bench::gather_all(problem.empty() ? 0.0 : 1.0, comm);
      std::string ranks;
      for (std::size_t r = 0; r < wrong.size(); ++r)
        if (wrong[r] > 0) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
      if (!ranks.empty())
        throw std::runtime_error(op.label + " (" + peer->name + ") is wrong on rank(s) " + ranks +
                                 (problem.empty() ? "" : "; here (rank " + std::to_string(rank) + "): " + problem));
    }
  }
}

// Median over rounds of the slowest rank's seconds per operation: {raw, ours}.
std::pair<double, double> measure(const Operation& op, const Config& config, MPI_Comm comm) {
  const Peer* peers[] = {&op.raw, &op.ours};
  int iters[2];
  for (int p = 0; p < 2; ++p) {  // a warm-up batch sets each peer's count (the same on every rank)
    const double per_op = time_batch(*peers[p], config.warmup, comm);
    iters[p] = std::clamp(static_cast<int>(config.seconds / std::max(per_op, 1e-7)), 10, 200000);
  }
  std::vector<double> rounds[2];
  for (int r = 0; r < config.rounds; ++r)
    for (int p = 0; p < 2; ++p) rounds[p].push_back(time_batch(*peers[p], iters[p], comm));
  return {hvd::bench::summarize(rounds[0]).median, hvd::bench::summarize(rounds[1]).median};
}

Config parse(const hvd::bench::Args& args) {
  Config c;
  c.rounds = static_cast<int>(args.get_int("--rounds", c.rounds));
  c.warmup = static_cast<int>(args.get_int("--warmup", c.warmup));
  c.seconds = args.get_double("--seconds", c.seconds);
  args.reject_unknown();
  if (c.rounds < 1 || c.warmup < 1 || c.seconds <= 0)
    throw std::invalid_argument("need --rounds >= 1, --warmup >= 1, and --seconds > 0");
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  hvd::bench::Args args(argc, argv);
  if (args.flag("--help")) {
    std::puts("usage: mpirun -np N latency_benchmark [--rounds R] [--seconds S] [--warmup W]");
    return 0;
  }
  hvd::bench::Session session(&argc, &argv);
  try {
    const Config config = parse(args);
    auto value = hvd::HostTensor::allocate(hvd::DataType::Float32, {1});
    const auto ops = make_operations(value, session.comm(), session.rank(), session.size());
    check_all(ops, session.comm(), session.rank());
    hvd::bench::Table table({"operation", "raw MPI call", "raw (us)", "ours (us)", "ours/raw"});
    double allreduce_ratio = 0;
    for (const auto& op : ops) {
      *value->data_as<float>() = 0.0f;  // zeros stay finite however many in-place sums follow
      const auto [raw, ours] = measure(op, config, session.comm());
      table.add({op.label, op.raw_call, fixed(raw * 1e6, 2), fixed(ours * 1e6, 1), fixed(ours / raw, 1) + "x"});
      if (op.raw_call == "MPI_Allreduce") allreduce_ratio = ours / raw;
    }
    if (session.rank() == 0) {
      std::printf("\n### synchronous small operations, np=%d (median round, slowest rank; ours/raw is a time "
                  "ratio: <1 means ours is faster)\n\n%s\n",
                  session.size(), table.str().c_str());
      hvd::bench::report_target("sync 4-byte allreduce at np=" + std::to_string(session.size()) +
                                    ": ours / raw MPI_Allreduce time",
                                allreduce_ratio, kAllreduceGoal, /*at_least=*/false, "x");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "latency_benchmark (rank %d): %s\n", session.rank(), e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return 0;
}
