#include "backends/nccl/device_buffers.h"

#include "backends/nccl/nccl_errors.h"

namespace hvd::detail {

namespace {
// Rounds up so that a slowly growing workload does not reallocate on every step.
std::size_t grown_capacity(std::size_t bytes) {
  constexpr std::size_t kGranule = 1 << 20;
  if (bytes == 0) bytes = 1;
  return (bytes + kGranule - 1) / kGranule * kGranule;
}
}  // namespace

DeviceFusionBuffer::~DeviceFusionBuffer() {
  // The context releases in stream order at shutdown; this is the fallback (context never
  // prepared a stream, or shutdown was skipped): a plain synchronous free.
  if (data_ != nullptr) cudaFree(data_);
}

void* DeviceFusionBuffer::get(std::size_t bytes, cudaStream_t stream) {
  if (bytes <= capacity_ && data_ != nullptr) return data_;
  release(stream);
  const std::size_t capacity = grown_capacity(bytes);
  check_cuda(cudaMallocAsync(&data_, capacity, stream), "allocating the device fusion buffer");
  capacity_ = capacity;
  return data_;
}

void DeviceFusionBuffer::release(cudaStream_t stream) {
  if (data_ != nullptr) cudaFreeAsync(data_, stream);
  data_ = nullptr;
  capacity_ = 0;
}

PinnedHostBuffer::~PinnedHostBuffer() { release(); }

void* PinnedHostBuffer::get(std::size_t bytes) {
  if (bytes <= capacity_ && data_ != nullptr) return data_;
  release();
  const std::size_t capacity = grown_capacity(bytes);
  check_cuda(cudaMallocHost(&data_, capacity), "allocating the pinned host staging buffer");
  capacity_ = capacity;
  return data_;
}

void PinnedHostBuffer::release() {
  if (data_ != nullptr) cudaFreeHost(data_);
  data_ = nullptr;
  capacity_ = 0;
}

}  // namespace hvd::detail
