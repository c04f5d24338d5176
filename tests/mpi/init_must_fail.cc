// A rank program for launches that must fail in hvd::init() on every rank (ranks started with
// different settings, MPMD; a rank late to init): exits 0 (or $HVD_TEST_EXIT_ON_MATCH) only
// when hvd::init() threw hvd::Error and the message contains every argument; prints the
// message, so ctest's log shows it. The rank $HVD_TEST_LATE_RANK sleeps
// $HVD_TEST_LATE_SECONDS before hvd::init().
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <string>
#include <thread>

#include <horovodcpp/horovod.h>

int main(int argc, char** argv) {
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  const std::string me = rank ? rank : "?";
  const char* late = std::getenv("HVD_TEST_LATE_RANK");
  if (late != nullptr && me == late)
    std::this_thread::sleep_for(std::chrono::seconds(std::atoi(std::getenv("HVD_TEST_LATE_SECONDS"))));
  const auto start = std::chrono::steady_clock::now();
  try {
    hvd::init();
  } catch (const hvd::Error& e) {
    const std::string message = e.what();
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "rank %s: hvd::init() threw after %.1f s: %s\n", me.c_str(), took, message.c_str());
    int missing = 0;
    for (int i = 1; i < argc; ++i)
      if (message.find(argv[i]) == std::string::npos) {
        std::fprintf(stderr, "rank %s: FAIL: the message lacks '%s'\n", me.c_str(), argv[i]);
        ++missing;
      }
    if (missing != 0) return 1;
    std::fprintf(stderr, "rank %s: the expected error\n", me.c_str());
    // Exiting non-zero makes mpirun end the job: give the other ranks a moment to report too.
    if (const char* linger = std::getenv("HVD_TEST_LINGER_SECONDS"))
      std::this_thread::sleep_for(std::chrono::seconds(std::atoi(linger)));
    const char* code = std::getenv("HVD_TEST_EXIT_ON_MATCH");
    return code ? std::atoi(code) : 0;
  }
  std::fprintf(stderr, "rank %s: FAIL: hvd::init() succeeded\n", me.c_str());
  hvd::shutdown();
  return 2;
}
