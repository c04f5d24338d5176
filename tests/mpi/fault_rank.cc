// A rank program for fault tests driven from outside (tests/mpi/fault_test.sh): every rank
// writes its pid to $HVD_TEST_DIR/pid.<rank> and runs allreduces (checked against the closed
// form) until one fails. The last rank may leave first, as argv[1] says:
//   loop     nobody leaves (the script freezes or kills a rank itself)
//   return   the last rank returns from main without hvd::shutdown()
//   exit     the last rank calls exit(0) without hvd::shutdown()
//   throw    the last rank lets an exception escape main (std::terminate)
//   allocator  every step is an allgather, and the last rank's output allocator throws
//            std::bad_alloc at step 20 (as out of memory), while the others already wait in it
//   shutdown after 5 steps every rank marks $HVD_TEST_DIR/warm.<rank>; the last rank then idles
//            (the script freezes it), the others wait for $HVD_TEST_DIR/stopped and call
//            hvd::shutdown(), whose round needs the frozen rank: the watchdog's liveness timeout
//            must end it. They print "rank R: hvd::shutdown() took S s" and exit 3.
// A rank whose allreduce fails prints "rank R: caught after S s: MESSAGE", marks it in
// $HVD_TEST_DIR/caught.<rank>, waits (at most 5 s) until every other surviving rank has too, calls
// hvd::shutdown() (which must return promptly) and exits 3. The wait: each rank's liveness clock
// starts when it enters the stuck cycle, a few ms apart, and mpirun kills the ranks still running
// once the first one exits non-zero, before a later rank could print its own error.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>

#include <horovodcpp/horovod.h>

#include "tests/common/rank_markers.h"

using Clock = std::chrono::steady_clock;

namespace {
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The survivors are every rank but the last (the one stopped, killed or leaving).
void wait_for_survivors(const char* dir, int rank, int size) {
  if (dir != nullptr)
    hvd::test::mark_and_wait_for_ranks(std::string(dir) + "/caught.", rank, size - 1, std::chrono::seconds(5));
}

// Mode "shutdown" (see the top of this file); returns main's exit status.
int shut_down_beside_frozen_rank(const char* dir, int rank, int size) {
  const std::string at = dir != nullptr ? dir : ".";
  std::ofstream(at + "/warm." + std::to_string(rank)) << rank << "\n";
  if (rank == size - 1) {
    std::this_thread::sleep_for(std::chrono::seconds(60));  // frozen meanwhile, then killed
    return 5;
  }
  const auto waiting = Clock::now();
  while (access((at + "/stopped").c_str(), F_OK) != 0 && since(waiting) < 30)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const auto stopping = Clock::now();
  hvd::shutdown();
  std::fprintf(stderr, "rank %d: hvd::shutdown() took %.1f s\n", rank, since(stopping));
  wait_for_survivors(dir, rank, size);
  return 3;
}
}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "loop";
  hvd::init();
  const int rank = hvd::rank(), size = hvd::size();
  const char* dir = std::getenv("HVD_TEST_DIR");
  if (dir != nullptr) std::ofstream(std::string(dir) + "/pid." + std::to_string(rank)) << getpid() << "\n";
  auto t = hvd::HostTensor::allocate(hvd::DataType::Float32, {16});
  const auto start = Clock::now();
  for (long i = 0; since(start) < 60; ++i) {
    if (mode == "shutdown" && i == 5) return shut_down_beside_frozen_rank(dir, rank, size);
    auto* p = static_cast<float*>(t->data());
    for (int k = 0; k < 16; ++k) p[k] = static_cast<float>(rank + 1);
    if (rank == size - 1 && i == 20) {
      std::fprintf(stderr, "rank %d: leaving by '%s'\n", rank, mode.c_str());
      if (mode == "return") return 0;
      if (mode == "exit") std::exit(0);
      if (mode == "throw") throw std::runtime_error("uncaught on purpose");
    }
    const auto issued = Clock::now();
    try {
      if (mode == "allocator") {
        const bool fail = rank == size - 1 && i == 20;
        hvd::OutputAllocator allocate = [fail](hvd::DataType dtype, const hvd::TensorShape& shape) -> hvd::TensorPtr {
          if (fail) throw std::bad_alloc();
          return hvd::HostTensor::allocate(dtype, shape);
        };
        hvd::Handle h = hvd::allgather_async(t, allocate, {"step.gather"});
        h.wait();
        const auto* out = static_cast<const float*>(h.outputs().at(0)->data());
        for (int k = 0; k < 16 * size; ++k)
          if (out[k] != static_cast<float>(k / 16 + 1)) {
            std::fprintf(stderr, "rank %d: FAIL: wrong gathered value %f at %d\n", rank, out[k], k);
            return 4;
          }
        p[0] = size * (size + 1) / 2.0f;  // the allreduce's closed form, checked below
      } else {
        hvd::allreduce_async(t, t, {hvd::ReduceOp::Sum, "step"}).wait();
      }
    } catch (const hvd::Error& e) {
      std::fprintf(stderr, "rank %d: caught after %.1f s: %s\n", rank, since(issued), e.what());
      wait_for_survivors(dir, rank, size);
      const auto stopping = Clock::now();
      hvd::shutdown();
      std::fprintf(stderr, "rank %d: hvd::shutdown() took %.1f s\n", rank, since(stopping));
      return 3;
    }
    if (p[0] != size * (size + 1) / 2.0f) {
      std::fprintf(stderr, "rank %d: FAIL: wrong sum %f\n", rank, p[0]);
      return 4;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::fprintf(stderr, "rank %d: FAIL: no fault within 60 s\n", rank);
  hvd::shutdown();
  return 5;
}
