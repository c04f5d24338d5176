// What a test can ask of the emulated CUDA runtime and NCCL (test-only; see
// Note [What the emulated CUDA and NCCL model]): faults to inject, counted from the call on, in
// this process only, and a slow "kernel" to hold a stream back. Any thread.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

namespace hvd::emu {

// The `nth` kernel launch from now (1 = the next) returns `error` and enqueues nothing.
void fail_kernel_launch(int nth, cudaError_t error);
// The `nth` device-to-device cudaMemcpyAsync from now returns `error` and enqueues nothing. Copies
// to or from host memory are not counted: they are the tests' own uploads and downloads.
void fail_device_copy(int nth, cudaError_t error);
// The `nth` NCCL collective or point-to-point call from now returns `result` without enqueueing.
void fail_nccl_call(int nth, ncclResult_t result);
// When the `nth` NCCL operation from now runs on its stream, its communicator reports `result`
// asynchronously and the operation hangs, as a kernel of a failed NCCL communicator does, until
// ncclCommAbort.
void inject_async_error(int nth, ncclResult_t result);
// The `nth` communicator this process creates from now never completes its init here, as if this
// rank had stopped before reaching it: the other ranks wait for it (forever when blocking).
void stall_comm_init(int nth);
// Every ncclCommFinalize of this process from now never completes, as if the rank had died
// while finalizing: its peers' finalize waits for it.
void stall_finalize();
// A kernel that keeps `stream` busy for `milliseconds` (what a slow producer does).
cudaError_t sleep_on_stream(cudaStream_t stream, int milliseconds);
// The next NCCL operation this process runs waits `milliseconds` after every rank has posted its
// part, before reading theirs (a GPU behind its peers, who are done with the operation by then).
void hold_next_read(int milliseconds);

// For the emulation itself.
cudaError_t take_kernel_launch_fault();
cudaError_t take_device_copy_fault();
ncclResult_t take_nccl_call_fault();
ncclResult_t take_async_fault();
bool take_init_stall();
bool finalize_stalls();
int take_read_hold();  // milliseconds, 0 when none is armed

}  // namespace hvd::emu
