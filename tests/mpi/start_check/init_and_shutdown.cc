// hvd::init() and hvd::shutdown(), and a line from each rank in between (start_check_race.sh).
#include <cstdio>

#include <horovodcpp/horovod.h>

int main() {
  hvd::init();
  std::printf("rank %d: up\n", hvd::rank());
  std::fflush(stdout);
  hvd::shutdown();
  return 0;
}
