// Read-only views of the running runtime for tests and benchmarks (not part of the public API).
// Callable from any thread while hvd is initialized; throw hvd::Error otherwise.
#pragma once

#include "core/controller.h"

namespace hvd::detail {

// The controller's counters (cycles, slow-path cycles, cache hits, invalidations) on this rank.
ControllerStats controller_stats();
// The tuned parameters in effect on this rank (HOROVOD_AUTOTUNE=1 changes them; the settings'
// otherwise). Every rank reports the same after the same cycle.
TunableParameters tuned_parameters();
// False while this rank's autotuner is still deciding: only rank 0 tunes (HOROVOD_AUTOTUNE=1),
// so other ranks always answer true. Its final decision takes effect on every rank in the
// global cycle after it was made.
bool autotune_decided();
// Benchmarks: called on rank 0, every rank switches to `p` in one later global cycle, as an
// autotune decision would (a cycle needs work: keep submitting, and read tuned_parameters() to
// see it applied). On other ranks it changes nothing. Throws hvd::Error while autotune is still
// deciding on this rank, or naming a value out of range.
void request_parameters(const TunableParameters& p);
// The background thread's Linux thread id (its counters are under /proc/self/task/<id>/).
long background_thread_id();

}  // namespace hvd::detail
