// idle_benchmark: CPU that an initialized runtime with nothing to do costs each rank, from
// getrusage(RUSAGE_SELF) (user + system time of every thread) over a window in which the main
// thread sleeps. Three windows in one launch: MPI alone (before hvd::init: the floor), the
// runtime right after init, and the runtime after a burst of allreduces (the idle state a
// training job sees between steps is reached after work, not only after init). Then a
// training-like loop, each step 20 ms of "compute" (a sleep) and 20 x 4 KB allreduces: raw
// MPI_Allreduce one at a time before hvd::init, the runtime (submit all, then wait) after it;
// the CPU of the runtime's loop beside the raw one is what its background thread costs while a
// job trains.
//
//   mpirun -np 2 ./idle_benchmark [--seconds 4] [--settle 0.5] [--steps 100]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <horovodcpp/horovod.h>

#include "bench_common.h"

namespace {

using hvd::bench::fixed;

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// Percent of one core used by this process while the caller sleeps for `seconds`.
double idle_percent(double settle, double seconds) {
  std::this_thread::sleep_for(std::chrono::duration<double>(settle));
  const double cpu0 = cpu_seconds();
  const double wall0 = hvd::bench::now_seconds();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  return 100.0 * (cpu_seconds() - cpu0) / (hvd::bench::now_seconds() - wall0);
}

void burst_of_allreduces() {
  auto t = hvd::HostTensor::allocate(hvd::DataType::Float32, {1024});
  for (int i = 0; i < 50; ++i) {
    std::fill_n(t->data_as<float>(), 1024, 1.0f);
    hvd::allreduce_async(t, t, {hvd::ReduceOp::Sum, "idle_benchmark.burst"}).wait();
    if (t->data_as<float>()[0] != static_cast<float>(hvd::size()))
      throw std::runtime_error("burst allreduce gave " + std::to_string(t->data_as<float>()[0]) + ", expected " +
                               std::to_string(hvd::size()));
  }
}

constexpr int kStepTensors = 20;
constexpr std::int64_t kStepCount = 1024;  // float32 values per tensor: 4 KB
constexpr double kComputeSeconds = 0.02;

// CPU and wall time of a training-like loop, per step.
struct LoopCost {
  double percent = 0;  // % of one core while the loop runs
  double step_ms = 0;  // wall time per step
};

// `steps` steps of kComputeSeconds asleep, then `exchange` (which sums kStepTensors tensors of
// ones in place over `ranks` ranks); every sum is checked.
LoopCost training_loop(int steps, int ranks, const std::vector<std::shared_ptr<hvd::HostTensor>>& tensors,
                       const std::function<void()>& exchange) {
  const double cpu0 = cpu_seconds();
  const double wall0 = hvd::bench::now_seconds();
  for (int step = 0; step < steps; ++step) {
    for (auto& t : tensors) std::fill_n(t->data_as<float>(), kStepCount, 1.0f);
    std::this_thread::sleep_for(std::chrono::duration<double>(kComputeSeconds));
    exchange();
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const float* v = tensors[i]->data_as<float>();
      if (std::any_of(v, v + kStepCount, [ranks](float x) { return x != static_cast<float>(ranks); }))
        throw std::runtime_error("training loop, step " + std::to_string(step) + ": tensor " + std::to_string(i) +
                                 " does not sum to the number of ranks");
    }
  }
  const double wall = hvd::bench::now_seconds() - wall0;
  return {100.0 * (cpu_seconds() - cpu0) / wall, 1e3 * wall / steps};
}

std::vector<std::shared_ptr<hvd::HostTensor>> step_tensors() {
  std::vector<std::shared_ptr<hvd::HostTensor>> tensors;
  for (int i = 0; i < kStepTensors; ++i) tensors.push_back(hvd::HostTensor::allocate(hvd::DataType::Float32, {kStepCount}));
  return tensors;
}

LoopCost raw_training_loop(int steps, MPI_Comm comm) {
  const auto tensors = step_tensors();
  int ranks = 0;
  MPI_Comm_size(comm, &ranks);
  return training_loop(steps, ranks, tensors, [&] {
    for (auto& t : tensors) MPI_Allreduce(MPI_IN_PLACE, t->data(), kStepCount, MPI_FLOAT, MPI_SUM, comm);
  });
}

LoopCost runtime_training_loop(int steps) {
  const auto tensors = step_tensors();
  return training_loop(steps, hvd::size(), tensors, [&] {
    std::vector<hvd::Handle> handles;
    for (int i = 0; i < kStepTensors; ++i)
      handles.push_back(hvd::allreduce_async(tensors[i], tensors[i],
                                             {hvd::ReduceOp::Sum, "idle_benchmark.step." + std::to_string(i)}));
    for (auto& h : handles) h.wait();
  });
}

}  // namespace

int main(int argc, char** argv) {
  hvd::bench::Args args(argc, argv);
  if (args.flag("--help")) {
    std::puts("usage: mpirun -np N idle_benchmark [--seconds S] [--settle S] [--steps N]");
    return 0;
  }
  hvd::bench::Session session(&argc, &argv, /*start_runtime=*/false);
  try {
    const double seconds = args.get_double("--seconds", 4.0);
    const double settle = args.get_double("--settle", 0.5);
    const int steps = static_cast<int>(args.get_int("--steps", 100));
    args.reject_unknown();
    if (seconds <= 0 || settle < 0 || steps < 1)
      throw std::invalid_argument("need --seconds > 0, --settle >= 0 and --steps >= 1");
    MPI_Barrier(session.comm());
    const double mpi_only = idle_percent(0, seconds);
    hvd::bench::quiet_barrier(session.comm());
    const LoopCost raw_loop = raw_training_loop(steps, session.comm());
    hvd::init();
    const double after_init = idle_percent(settle, seconds);
    burst_of_allreduces();
    const double after_work = idle_percent(settle, seconds);
    hvd::bench::quiet_barrier(session.comm());
    const LoopCost ours_loop = runtime_training_loop(steps);
    std::vector<std::vector<double>> loop;  // per column, every rank's value
    for (double v : {raw_loop.percent, ours_loop.percent, raw_loop.step_ms, ours_loop.step_ms})
      loop.push_back(hvd::bench::gather_all(v, session.comm()));
    auto all_init = hvd::bench::gather_all(after_init, session.comm());
    auto all_work = hvd::bench::gather_all(after_work, session.comm());
    auto all_mpi = hvd::bench::gather_all(mpi_only, session.comm());
    hvd::shutdown();
    if (session.rank() == 0) {
      hvd::bench::Table table({"rank", "MPI only (% of a core)", "runtime idle after init", "idle after 50 allreduces"});
      double worst = 0;
      for (int r = 0; r < session.size(); ++r) {
        table.add({std::to_string(r), fixed(all_mpi[r], 2), fixed(all_init[r], 2), fixed(all_work[r], 2)});
        worst = std::max({worst, all_init[r], all_work[r]});
      }
      std::printf("\n### idle CPU per rank, np=%d, %s s windows (getrusage, all threads)\n\n%s\n", session.size(),
                  fixed(seconds, 1).c_str(), table.str().c_str());
      hvd::bench::Table busy({"rank", "raw MPI loop (% of a core)", "runtime loop (% of a core)", "runtime - raw",
                              "raw step (ms)", "runtime step (ms)"});
      for (int r = 0; r < session.size(); ++r) {
        busy.add({std::to_string(r), fixed(loop[0][r], 2), fixed(loop[1][r], 2), fixed(loop[1][r] - loop[0][r], 2),
                  fixed(loop[2][r], 2), fixed(loop[3][r], 2)});
      }
      std::printf("### CPU per rank in a training-like loop, np=%d, %d steps of %d ms asleep + %d x 4 KB allreduces\n\n%s\n",
                  session.size(), steps, static_cast<int>(kComputeSeconds * 1e3), kStepTensors, busy.str().c_str());
      hvd::bench::report_target("idle runtime at np=" + std::to_string(session.size()) + ": worst rank, % of a core",
                                worst, 2.0, false, "%");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "idle_benchmark (rank %d): %s\n", session.rank(), e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return 0;
}
