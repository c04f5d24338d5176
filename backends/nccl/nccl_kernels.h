// Small device kernels of the NCCL backend: scaling a buffer (pre/postscale and averaging of
// integer types) and copying many tensors in and out of the fusion buffer with one launch.
// Enqueue-only: each call launches on `stream` and returns at once. Background thread.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "horovodcpp/horovod.h"

namespace hvd::detail {

// data[i] = data[i] * factor for `count` elements of `dtype`, computed in float (16-bit types and
// float32), double, or for integers double rounded to nearest (as core/host_scale.cc does).
cudaError_t scale_device_buffer(void* data, std::int64_t count, DataType dtype, double factor,
                                cudaStream_t stream);
// Same, out of place: dst = src * factor (dst may equal src).
cudaError_t scale_device_copy(const void* src, void* dst, std::int64_t count, DataType dtype,
                              double factor, cudaStream_t stream);

struct DeviceCopy {
  const void* src;
  void* dst;
  std::int64_t bytes;
};
// Every copy in `copies` (device to device, non-overlapping), a few launches for all of them.
cudaError_t batched_device_copy(const std::vector<DeviceCopy>& copies, cudaStream_t stream);

}  // namespace hvd::detail
