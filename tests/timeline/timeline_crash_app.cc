// Runs allreduces (cached, and fused groups) until killed, with the timeline on; writes its pid
// to $HOROVOD_TIMELINE.pid.rank<r> so timeline_crash_test.sh can SIGKILL one rank mid-run.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "horovodcpp/horovod.h"

int main() {
  hvd::init();
  const char* path = std::getenv("HOROVOD_TIMELINE");
  if (path == nullptr) {
    std::fprintf(stderr, "timeline_crash_app: set HOROVOD_TIMELINE\n");
    return 2;
  }
  std::ofstream(std::string(path) + ".pid.rank" + std::to_string(hvd::rank())) << ::getpid();
  auto grad = hvd::HostTensor::allocate(hvd::DataType::Float32, {1024});
  std::vector<hvd::TensorPtr> group;
  for (int k = 0; k < 4; ++k) group.push_back(hvd::HostTensor::allocate(hvd::DataType::Float32, {256}));
  // Bounded so a script that never kills it still ends (about a minute on a loaded machine).
  for (int step = 0; step < 200000; ++step) {
    hvd::allreduce_async(grad, grad, {hvd::ReduceOp::Average, "crash.grad"}).wait();
    hvd::grouped_allreduce_async(group, group, {hvd::ReduceOp::Average, "crash.group"}).wait();
  }
  hvd::shutdown();
  std::fprintf(stderr, "timeline_crash_app: finished without being killed\n");
  return 3;
}
