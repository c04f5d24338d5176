// A rank program for launches that must fail in hvd::init() on every rank (ranks started with
// different settings, MPMD): exits 0 only when hvd::init() threw hvd::Error and the message
// contains every argument; prints the message, so ctest's log shows it.
#include <cstdio>
#include <cstdlib>
#include <string>

#include <horovodcpp/horovod.h>

int main(int argc, char** argv) {
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  const std::string me = rank ? rank : "?";
  try {
    hvd::init();
  } catch (const hvd::Error& e) {
    const std::string message = e.what();
    std::fprintf(stderr, "rank %s: hvd::init() threw: %s\n", me.c_str(), message.c_str());
    int missing = 0;
    for (int i = 1; i < argc; ++i)
      if (message.find(argv[i]) == std::string::npos) {
        std::fprintf(stderr, "rank %s: FAIL: the message lacks '%s'\n", me.c_str(), argv[i]);
        ++missing;
      }
    return missing == 0 ? 0 : 1;
  }
  std::fprintf(stderr, "rank %s: FAIL: hvd::init() succeeded\n", me.c_str());
  hvd::shutdown();
  return 2;
}
