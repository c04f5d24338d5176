// Internals shared by the emulated CUDA runtime and NCCL (test-only; see
// Note [What the emulated CUDA and NCCL model]). Nothing here is linked into libhorovodcpp: the
// emulated test binaries link libhorovodcpp_emulated, the same backend objects with this library
// in place of libcudart and libnccl.
//
// Note [What the emulated CUDA and NCCL model]
// The NCCL backend is compiled once against the real CUDA and NCCL headers; its emulated test
// variant resolves the same calls here. What the emulation keeps from a GPU:
// - Devices: HVD_EMU_DEVICES per process (default 2), a current device per thread. Device memory
//   is an address range the host cannot touch (PROT_NONE): host code that dereferences a device
//   pointer dies with a message, as on a GPU. Device work reaches the bytes through a second
//   mapping, after a check that the range is a live allocation of the device the work runs on.
// - Streams are FIFO worker threads that sleep a random 0..HVD_EMU_MAX_DELAY_US (default 200) before
//   each operation, so work on different streams interleaves differently on every run. Events,
//   cudaStreamWaitEvent and the legacy default stream's implicit ordering are honoured; nothing
//   else orders two streams.
// - Memory is poisoned (0xff bytes: NaN in every float type, -1 in signed integers) when it is
//   allocated and, for stream-ordered frees, when the free is reached in stream order.
//   cudaMallocAsync may hand out a block that the same stream freed before the free has run,
//   as the CUDA pool does; a reader on another stream that does not wait sees stale or poisoned
//   bytes. cudaFree'd memory is never handed out again, and any device access to it is fatal.
// - NCCL collectives run on the stream's worker thread and rendezvous with the other processes
//   of the communicator through shared memory (/dev/shm/hvdemu-*, HVD_EMU_SHM_PREFIX in place of
//   hvdemu; see Note [Reclaiming the emulation's shared memory]). Ranks that enqueue different
//   collectives hang, as on a GPU, after printing what each rank enqueued; a test fails by its
//   timeout. A peer that aborts its communicator or exits turns into ncclRemoteError, as NCCL
//   over a network reports it (HVD_EMU_PEER_ABORTS_UNSEEN=1: an aborted peer is not reported,
//   and the operation waits on, as between the GPUs of one node); one that aborts once done with
//   its part of an operation leaves that part to the slower ranks, as a GPU's transfer would have.
// - Errors can be injected (emulation_control.h): a failing kernel launch or NCCL call, an
//   asynchronous NCCL error (the operation then hangs until ncclCommAbort), a communicator
//   whose init or finalize never completes on this process, a rank slow to read its peers'
//   parts.
// What it cannot check: real NCCL and its algorithms, kernels on silicon, the caching allocator,
// memory consistency beyond what the host gives, timing.
#pragma once

#include <cstdint>
#include <string>

namespace hvd::emu {

struct Config {
  int devices = 2;
  int max_delay_us = 200;
  std::uint64_t seed = 0;
  std::string segment_prefix = "hvdemu";  // of the shared-memory segments' names
  bool peer_aborts_unseen = false;
};
const Config& config();

// Prints "EMULATED CUDA: <what>" and aborts: misuse a GPU would punish with a fault or silent
// corruption.
[[noreturn]] void fatal(const std::string& what);

// A random delay before each stream operation (thread-safe).
void random_delay();

// Names the calling thread (at most 15 characters), so that a stuck job's description
// (tests/common/bounded_job.sh) tells the emulation's threads from the runtime's, whose names
// they would inherit.
void name_this_thread(const char* name);

int current_device();
void set_current_device(int device);

}  // namespace hvd::emu
