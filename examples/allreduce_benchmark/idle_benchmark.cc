// idle_benchmark: CPU that an initialized runtime with nothing to do costs each rank, from
// getrusage(RUSAGE_SELF) (user + system time of every thread) over a window in which the main
// thread sleeps. Three windows in one launch: MPI alone (before hvd::init: the floor), the
// runtime right after init, and the runtime after a burst of allreduces (the idle state a
// training job sees between steps is reached after work, not only after init).
//
//   mpirun -np 2 ./idle_benchmark [--seconds 4] [--settle 0.5]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
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

}  // namespace

int main(int argc, char** argv) {
  hvd::bench::Args args(argc, argv);
  if (args.flag("--help")) {
    std::puts("usage: mpirun -np N idle_benchmark [--seconds S] [--settle S]");
    return 0;
  }
  hvd::bench::Session session(&argc, &argv, /*start_runtime=*/false);
  try {
    const double seconds = args.get_double("--seconds", 4.0);
    const double settle = args.get_double("--settle", 0.5);
    args.reject_unknown();
    if (seconds <= 0 || settle < 0) throw std::invalid_argument("need --seconds > 0 and --settle >= 0");
    MPI_Barrier(session.comm());
    const double mpi_only = idle_percent(0, seconds);
    hvd::init();
    const double after_init = idle_percent(settle, seconds);
    burst_of_allreduces();
    const double after_work = idle_percent(settle, seconds);
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
      hvd::bench::report_target("idle runtime at np=" + std::to_string(session.size()) + ": worst rank, % of a core",
                                worst, 2.0, false, "%");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "idle_benchmark (rank %d): %s\n", session.rank(), e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return 0;
}
