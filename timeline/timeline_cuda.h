// Timeline phases in GPU stream order, for the NCCL backend (it needs the CUDA runtime, so only
// code built with CUDA includes this). switch_activity_on_stream() moves each tensor row to its
// next activity when the GPU reaches that point of the stream -- a host function enqueued on the
// stream runs Timeline::switch_activity there -- rather than when the background thread enqueued
// the work. The host function runs on a CUDA driver thread and touches only the Timeline, which
// is thread-safe, and never calls CUDA. Costs nothing while recording is off.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "timeline/timeline.h"

namespace hvd {
namespace detail {

// What one host function needs; it owns and frees this.
struct StreamActivitySwitch {
  Timeline* timeline;
  std::vector<std::string> tensors;
  const char* next;  // a string literal
};

inline void run_stream_activity_switch(void* data) {
  std::unique_ptr<StreamActivitySwitch> work(static_cast<StreamActivitySwitch*>(data));
  for (const auto& tensor : work->tensors) work->timeline->switch_activity(tensor, work->next);
}

}  // namespace detail

// `entries`: anything with `.name` per tensor (TensorTableEntry). If the host function cannot
// be enqueued, the switch happens now instead.
template <class Entries>
void switch_activity_on_stream(Timeline& timeline, const Entries& entries, const char* next,
                               cudaStream_t stream) {
  if (!timeline.enabled()) return;
  auto work = std::make_unique<detail::StreamActivitySwitch>();
  work->timeline = &timeline;
  work->next = next;
  for (const auto& entry : entries) work->tensors.push_back(entry.name);
  auto* raw = work.release();
  if (cudaLaunchHostFunc(stream, &detail::run_stream_activity_switch, raw) != cudaSuccess) {
    detail::run_stream_activity_switch(raw);
  }
}

}  // namespace hvd
