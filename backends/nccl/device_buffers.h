// Reusable buffers of the NCCL backend: the device fusion buffer (stream-ordered allocations, so
// growing it never blocks the host) and the pinned host staging buffer of hierarchical
// allreduce. Grown on demand to the largest size seen, never shrunk. Owned by NcclContext, used
// on the background thread only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace hvd::detail {

class DeviceFusionBuffer {
 public:
  DeviceFusionBuffer() = default;
  DeviceFusionBuffer(const DeviceFusionBuffer&) = delete;
  DeviceFusionBuffer& operator=(const DeviceFusionBuffer&) = delete;
  ~DeviceFusionBuffer();

  // A buffer of at least `bytes`, valid for work enqueued on `stream` from now on. Growing frees
  // the old one in stream order, after the work already enqueued has used it. Throws NcclFailure.
  void* get(std::size_t bytes, cudaStream_t stream);
  void release(cudaStream_t stream);  // frees in stream order

 private:
  void* data_ = nullptr;
  std::size_t capacity_ = 0;
};

class PinnedHostBuffer {
 public:
  PinnedHostBuffer() = default;
  PinnedHostBuffer(const PinnedHostBuffer&) = delete;
  PinnedHostBuffer& operator=(const PinnedHostBuffer&) = delete;
  ~PinnedHostBuffer();

  // At least `bytes` of page-locked host memory. Callers must have synchronised with any copy
  // still using the old buffer before asking for more (hierarchical allreduce does). Throws.
  void* get(std::size_t bytes);
  std::size_t capacity() const { return capacity_; }
  void release();

 private:
  void* data_ = nullptr;
  std::size_t capacity_ = 0;
};

}  // namespace hvd::detail
