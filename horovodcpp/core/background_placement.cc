#include "core/background_placement.h"

#include <sched.h>

#include <thread>

#include "core/blocked_callers.h"

namespace hvd::detail {

bool BackgroundPlacement::cores_full(int local_size) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return false;
  return local_size >= CPU_COUNT(&set);
}

bool ranks_outnumber_cores(int local_size) {
  return local_size > static_cast<int>(std::thread::hardware_concurrency());
}

int BackgroundPlacement::follow_blocked_caller() {
  if (!enabled_ || !BlockedCallers::any()) return -1;
  const int core = BlockedCallers::last_cpu();
  if (core < 0 || core == kept_on_ || core >= CPU_SETSIZE) return -1;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) return -1;  // e.g. a cpuset that excludes it
  kept_on_ = core;
  return core;
}

}  // namespace hvd::detail
