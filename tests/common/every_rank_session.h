// The Catch session of a multi-rank test program (the GPU tests, the LibTorch tests). With several
// ranks the first failed assertion ends the job at once: a rank that leaves a test case early
// submits other tensors than its peers, who would wait for it until the launcher's timeout (the
// first real-GPU run lost 400 s of its 540 so, on collectives that had already failed).
#pragma once

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>

#include "horovodcpp/horovod.h"

namespace hvd::test {

// Call after hvd::init(); calls hvd::shutdown() unless a failure with several ranks ends the job.
inline int run_session_on_every_rank(int argc, char** argv) {
  Catch::Session session;
  if (const int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;
  if (size() > 1) session.configData().abortAfter = 1;
  const int failed = session.run();
  if (failed != 0 && size() > 1) {
    std::fprintf(stderr, "rank %d: a test failed: ending the job without hvd::shutdown() (its peers may be waiting on it)\n",
                 rank());
    std::fflush(nullptr);
    std::_Exit(1);
  }
  shutdown();
  return failed == 0 ? 0 : 1;
}

}  // namespace hvd::test
