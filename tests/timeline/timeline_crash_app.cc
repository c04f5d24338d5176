// Runs allreduces (cached, and fused groups) until killed, with the timeline on; writes its pid
// to $HOROVOD_TIMELINE.pid.rank<r> so timeline_crash_test.sh can stop and SIGKILL one rank
// mid-run. It handles SIGINT and SIGTERM (what mpirun sends its ranks on Ctrl-C) the way an
// application that cares about its timeline would: a thread waiting for them calls
// hvd::stop_timeline(), which closes every open span and completes the file, and exits once
// every rank has done so. Open MPI's mpirun SIGKILLs the ranks still running as soon as one of
// them exits: a rank that exited right after its own stop (about 2 ms) cut a slower rank's stop
// short in 8 of 40 runs here, leaving its file as after kill -9.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "horovodcpp/horovod.h"
#include "tests/common/rank_markers.h"

namespace {

// Blocked in every thread (the runtime's threads inherit the mask): only the waiter sees them.
sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

// `prefix`: $HOROVOD_TIMELINE; each rank marks its stop in "<prefix>.stopped.rank<r>" and waits
// (at most 3 s: a peer killed outright never marks) until every rank has.
void stop_on_signal(int rank, int size, std::string prefix) {
  const sigset_t set = stop_signals();
  int signal = 0;
  if (sigwait(&set, &signal) != 0) return;
  hvd::stop_timeline();
  std::fprintf(stderr, "timeline_crash_app: rank %d stopped its timeline on signal %d\n", rank,
               signal);
  std::fflush(stderr);
  hvd::test::mark_and_wait_for_ranks(prefix + ".stopped.rank", rank, size, std::chrono::seconds(3));
  std::_Exit(128 + signal);
}

}  // namespace

int main() {
  const sigset_t set = stop_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  hvd::init();
  const char* path = std::getenv("HOROVOD_TIMELINE");
  if (path == nullptr) {
    std::fprintf(stderr, "timeline_crash_app: set HOROVOD_TIMELINE\n");
    return 2;
  }
  std::thread(stop_on_signal, hvd::rank(), hvd::size(), std::string(path)).detach();
  std::ofstream(std::string(path) + ".pid.rank" + std::to_string(hvd::rank())) << ::getpid();
  auto grad = hvd::HostTensor::allocate(hvd::DataType::Float32, {1024});
  std::vector<hvd::TensorPtr> group;
  for (int k = 0; k < 4; ++k) group.push_back(hvd::HostTensor::allocate(hvd::DataType::Float32, {256}));
  // A millisecond of "compute" per step, as a training loop has: the runtime negotiates on
  // demand, so without it the traces would grow by tens of thousands of steps a second.
  // Bounded so a script that never kills it still ends (about a minute).
  for (int step = 0; step < 50000; ++step) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    hvd::allreduce_async(grad, grad, {hvd::ReduceOp::Average, "crash.grad"}).wait();
    hvd::grouped_allreduce_async(group, group, {hvd::ReduceOp::Average, "crash.group"}).wait();
  }
  hvd::shutdown();
  std::fprintf(stderr, "timeline_crash_app: finished without being killed\n");
  return 3;
}
