// Small device kernels of the NCCL backend: scaling a buffer (pre/postscale), the two ends of an
// exact integer Average, and copying many tensors in and out of the fusion buffer with one launch.
// Enqueue-only: each call launches on `stream` and returns at once. Background thread.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "horovodcpp/horovod.h"

namespace hvd::detail {

// data[i] = data[i] * factor for `count` elements of `dtype`, computed in float (16-bit types and
// float32) or double; integers exactly as core/host_scale.cc scales them (integer::scaled:
// truncated toward zero, clamped to the dtype).
cudaError_t scale_device_buffer(void* data, std::int64_t count, DataType dtype, double factor,
                                cudaStream_t stream);
// Same, out of place: dst = src * factor (dst may equal src).
cudaError_t scale_device_copy(const void* src, void* dst, std::int64_t count, DataType dtype,
                              double factor, cudaStream_t stream);

// Integer Average (Note [Integer averages are exact], core/integer_average.h) on the device: the
// same steps and element functions as the host path. widen writes `count` elements of `src` as
// count * average_words(dtype) int64 words to `wide`; after a Sum of those words across the
// group, finish writes each sum / divisor (truncated toward zero) to `dst` as `dtype`. int16's
// other reductions use them too, with divisor 1 (Note [int16 reduces through int64 words on
// NCCL], nccl_ops.h).
cudaError_t widen_device_for_average(const void* src, std::int64_t count, DataType dtype, std::int64_t* wide,
                                     cudaStream_t stream);
cudaError_t finish_device_average(const std::int64_t* wide, std::int64_t count, DataType dtype, int divisor,
                                  void* dst, cudaStream_t stream);

struct DeviceCopy {
  const void* src;
  void* dst;
  std::int64_t bytes;
};
// Every copy in `copies` (device to device, non-overlapping), a few launches for all of them.
cudaError_t batched_device_copy(const std::vector<DeviceCopy>& copies, cudaStream_t stream);

}  // namespace hvd::detail
