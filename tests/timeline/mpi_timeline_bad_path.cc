// HOROVOD_TIMELINE naming a file that cannot be created (ctest sets a path under a directory
// that does not exist): only rank 0 opens it, yet every rank's hvd::init() must fail with an
// hvd::Error naming the path -- not rank 0 alone while the others go on and hang in their
// first collective. No Catch session: each rank checks what init did and exits with 0 or 1;
// mpirun fails if any rank does, and the ctest TIMEOUT catches a hang.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "horovodcpp/horovod.h"

int main() {
  const char* path = std::getenv("HOROVOD_TIMELINE");
  if (path == nullptr) {
    std::fprintf(stderr, "mpi_timeline_bad_path: set HOROVOD_TIMELINE\n");
    return 2;
  }
  try {
    hvd::init();
  } catch (const hvd::Error& e) {
    const std::string message = e.what();
    const bool names_path = message.find(path) != std::string::npos;
    std::printf("hvd::init() failed as it should (%s): %s\n",
                names_path ? "names the path" : "DOES NOT NAME THE PATH", e.what());
    if (hvd::is_initialized()) {
      std::printf("FAIL: hvd::is_initialized() is true after a failed init\n");
      return 1;
    }
    return names_path ? 0 : 1;
  }
  // init succeeded on this rank: the others may be stuck, so do not wait for them.
  std::printf("FAIL: hvd::init() succeeded with HOROVOD_TIMELINE=%s\n", path);
  std::fflush(stdout);
  std::_Exit(1);
}
