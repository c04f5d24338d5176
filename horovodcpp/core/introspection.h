// Read-only views of the running runtime for tests and benchmarks (not part of the public API).
// Callable from any thread while hvd is initialized; throw hvd::Error otherwise.
#pragma once

#include "core/controller.h"

namespace hvd::detail {

// The controller's counters (cycles, slow-path cycles, cache hits, invalidations) on this rank.
ControllerStats controller_stats();

}  // namespace hvd::detail
