// Which core the background thread runs on while a user thread waits for its result.
//
// When this host's ranks fill its cores, the scheduler has no idle core to wake a background
// thread on, and where the machine reports no cache topology (some VMs) it wakes each thread on
// the core it last ran on: in the gradient exchange after backward, both ranks' background
// threads took turns on one core while the other idled, for most of the exchange
// (docs/benchmarks.md, "Figures behind design choices"). The core of a user thread blocked on a
// result has nothing else to do, and it is this rank's own: so at each cycle start while a user
// thread is blocked, the background thread moves to that core (BlockedCallers records it). It
// stays there until a caller blocks elsewhere; the user threads themselves are never moved.
#pragma once

namespace hvd::detail {

class BackgroundPlacement {
 public:
  BackgroundPlacement() = default;
  explicit BackgroundPlacement(bool enabled) : enabled_(enabled) {}
  // Whether `local_size` ranks fill the cores this process may run on.
  static bool cores_full(int local_size);
  bool enabled() const { return enabled_; }
  // Background thread, at a cycle start: moves it to the core of the most recently blocked user
  // thread when one is blocked and this thread is not already kept there. Returns that core, or
  // -1 when it did not move.
  int follow_blocked_caller();

 private:
  bool enabled_ = false;
  int kept_on_ = -1;  // the core this thread's affinity holds it to, -1 while unrestricted
};

// Whether `local_size` ranks outnumber this host's cores: then no wait polls (the MPI channel's
// waits inside a cycle, the CyclePacer's looks), since a polling rank would take the core of the
// rank it waits for.
bool ranks_outnumber_cores(int local_size);

}  // namespace hvd::detail
