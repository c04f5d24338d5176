// How the benchmark's host heap treats freed memory. With glibc's defaults a training step on
// the CPU gives most of its activations back to the kernel when backward frees them (the heap
// top is trimmed, large blocks are unmapped) and faults them in again, page by page, in the
// next forward pass. On the 2-core VM of docs/benchmarks.md that refaulting cost a large part of
// a step, and how much depended on each process's trim state, which differed between ranks and
// drifted between minutes: hvd / sync scattered widely for that reason alone (docs/benchmarks.md,
// "Synthetic training", has the figures). Keeping freed memory in the process (as LibTorch's
// CUDA caching allocator does on a GPU) measures the communication instead of the allocator.
#pragma once

#include <string>

namespace hvd::bench {

// `mode` is "keep" (never unmap, never trim: freed memory is reused by the next step) or "glibc"
// (leave the allocator as the environment set it). Call before the first large allocation.
// Returns one line that says what was set; throws std::invalid_argument on another mode, or on
// "keep" where the C library is not glibc.
std::string configure_host_heap(const std::string& mode);

// Page faults the calling thread has taken so far (minor and major): what refaulting a trimmed
// heap costs shows up here, so the report can say whether a run paid it.
long thread_page_faults();

}  // namespace hvd::bench
