// Which process left a file behind, across pid reuse: a pid and the process's start time (clock
// ticks since boot, /proc/PID/stat field 22). Files that can outlive a killed writer carry both in
// their names, so whoever finds them later tells a dead writer's leftovers from a live one's:
// the elastic commit store's temporaries, the emulated NCCL's shared-memory segments (tests).
#pragma once

#include <cstdint>

namespace hvd::detail {

// When process `pid` started, or 0 when it does not exist or /proc cannot tell.
std::uint64_t process_start_time(long pid);

// Whether the process that was `pid` and started at `start_time` still runs (as any user's; a
// zombie does not). A start time of 0 (not known when recorded) checks the pid alone.
bool process_still_running(long pid, std::uint64_t start_time);

}  // namespace hvd::detail
