// How many user threads are blocked in Handle::wait() right now. While one is, the core it ran
// on has nothing to do, and the result it waits for comes only as fast as the background thread
// gets through the cycle: so the background thread's waits inside a cycle may poll that core
// instead of sleeping between looks. A sleep costs tens to hundreds of microseconds per round,
// and every round waits for the rank that slept longest.
#pragma once

#include <chrono>

namespace hvd::detail {

// Note [Polling while a caller is blocked]
// How long a wait polls while a user thread of this process is blocked on a result: that
// thread's core is idle, and each sleep would delay the result. Ranks in a cycle reach each
// round within tens of microseconds unless one was descheduled; past this the wait sleeps as
// usual. Synchronous small operations took less than half their time with the sleeping waits
// alone (docs/benchmarks.md, "Figures behind design choices"). Used by the MPI channel's waits
// inside a cycle and by the CyclePacer's wait for the coordinator's answer.
constexpr std::chrono::milliseconds kPollWhileBlocked{2};

class BlockedCallers {
 public:
  // Counts the calling thread as blocked for its lifetime.
  class Scope {
   public:
    Scope();
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
  };
  static bool any();
  // The core the most recently blocked user thread ran on (-1 before any).
  static int last_cpu();
};

}  // namespace hvd::detail
