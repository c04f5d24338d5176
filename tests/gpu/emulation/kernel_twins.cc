// Host twins of the device kernels (test-only): backends/nccl/nccl_kernels.cu and
// tests/gpu/gpu_test_kernels.cu, with the same declarations, computing the same results on the
// stream's worker thread. A launch returns cudaGetLastError's answer as the real ones do; the
// work touches memory only through DeviceMemory::access, so a kernel handed a freed, foreign or
// host pointer fails as on a GPU.
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <thread>
#include <type_traits>

#include "backends/nccl/nccl_kernels.h"
#include "core/host_scale.h"
#include "core/integer_average.h"
#include "tests/gpu/emulation/device_memory.h"
#include "tests/gpu/emulation/emulation_control.h"
#include "tests/gpu/emulation/half_elements.h"
#include "tests/gpu/emulation/streams.h"
#include "tests/gpu/gpu_test_util.h"

namespace hvd::emu {
namespace {

// Enqueues `work(device)` on the stream as one kernel.
template <class Work>
cudaError_t launch(cudaStream_t handle, Work work) {
  if (cudaError_t fault = take_kernel_launch_fault(); fault != cudaSuccess) return fault;
  auto stream = resolve_stream(handle);
  if (!stream) return cudaErrorInvalidResourceHandle;
  const int device = stream->device();
  enqueue_on(*stream, [work = std::move(work), device] { work(device); });
  return cudaSuccess;
}

template <class T>
cudaError_t launch_scale(const void* src, void* dst, std::int64_t count, double factor, cudaStream_t stream) {
  return launch(stream, [=](int device) {
    const std::size_t bytes = static_cast<std::size_t>(count) * sizeof(T);
    const unsigned char* in = DeviceMemory::get().access(src, bytes, device, "scale kernel (input)");
    unsigned char* out = DeviceMemory::get().access(dst, bytes, device, "scale kernel (output)");
    using W = typename Arithmetic<T>::type;  // as the CUDA kernel widens it
    const W f = static_cast<W>(factor);
    for (std::int64_t i = 0; i < count; ++i) {
      T v;
      std::memcpy(&v, in + i * sizeof(T), sizeof(T));
      const T r = narrow<T>(widen(v) * f);
      std::memcpy(out + i * sizeof(T), &r, sizeof(T));
    }
  });
}

// Integers: the host path's own function, which uses the element function the kernel uses
// (core/integer_elements.h).
cudaError_t launch_scale_integer(const void* src, void* dst, std::int64_t count, DataType dtype, double factor,
                                 cudaStream_t stream) {
  return launch(stream, [=](int device) {
    const std::size_t bytes = static_cast<std::size_t>(count) * dtype_size(dtype);
    const unsigned char* in = DeviceMemory::get().access(src, bytes, device, "scale kernel (input)");
    unsigned char* out = DeviceMemory::get().access(dst, bytes, device, "scale kernel (output)");
    detail::copy_scaled(out, in, count, dtype, factor);
  });
}

}  // namespace
}  // namespace hvd::emu

namespace hvd::detail {

cudaError_t scale_device_copy(const void* src, void* dst, std::int64_t count, DataType dtype, double factor,
                              cudaStream_t stream) {
  using namespace hvd::emu;
  if (count <= 0) return cudaSuccess;
  switch (dtype) {
    case DataType::UInt8:
    case DataType::Int8:
    case DataType::Int16:
    case DataType::Int32:
    case DataType::Int64: return launch_scale_integer(src, dst, count, dtype, factor, stream);
    case DataType::Float16: return launch_scale<Half>(src, dst, count, factor, stream);
    case DataType::BFloat16: return launch_scale<BFloat16>(src, dst, count, factor, stream);
    case DataType::Float32: return launch_scale<float>(src, dst, count, factor, stream);
    case DataType::Float64: return launch_scale<double>(src, dst, count, factor, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t scale_device_buffer(void* data, std::int64_t count, DataType dtype, double factor, cudaStream_t stream) {
  return scale_device_copy(data, data, count, dtype, factor, stream);
}

// The same steps as the CUDA kernels, through the host path's functions (core/integer_average.cc),
// which use the kernels' element functions (core/integer_elements.h).
cudaError_t widen_device_for_average(const void* src, std::int64_t count, DataType dtype, std::int64_t* wide,
                                     cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  if (!is_integer(dtype)) return cudaErrorInvalidValue;
  return hvd::emu::launch(stream, [=](int device) {
    auto& memory = hvd::emu::DeviceMemory::get();
    const unsigned char* in =
        memory.access(src, static_cast<std::size_t>(count) * dtype_size(dtype), device, "widening kernel (input)");
    unsigned char* out = memory.access(wide, static_cast<std::size_t>(count) * average_words(dtype) * sizeof(std::int64_t),
                                       device, "widening kernel (output)");
    widen_for_average(in, count, dtype, reinterpret_cast<std::int64_t*>(out));
  });
}

cudaError_t finish_device_average(const std::int64_t* wide, std::int64_t count, DataType dtype, int divisor,
                                  void* dst, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  if (!is_integer(dtype) || divisor < 1) return cudaErrorInvalidValue;
  return hvd::emu::launch(stream, [=](int device) {
    auto& memory = hvd::emu::DeviceMemory::get();
    const unsigned char* in = memory.access(wide, static_cast<std::size_t>(count) * average_words(dtype) * sizeof(std::int64_t),
                                            device, "average kernel (input)");
    unsigned char* out =
        memory.access(dst, static_cast<std::size_t>(count) * dtype_size(dtype), device, "average kernel (output)");
    finish_average(reinterpret_cast<const std::int64_t*>(in), count, dtype, divisor, out);
  });
}

// One "launch" per 32 copies, as the CUDA version batches them.
cudaError_t batched_device_copy(const std::vector<DeviceCopy>& copies, cudaStream_t stream) {
  constexpr std::size_t kCopiesPerLaunch = 32;
  for (std::size_t start = 0; start < copies.size(); start += kCopiesPerLaunch) {
    const std::size_t end = std::min(copies.size(), start + kCopiesPerLaunch);
    std::vector<DeviceCopy> batch;
    for (std::size_t i = start; i < end; ++i)
      if (copies[i].bytes > 0) batch.push_back(copies[i]);
    if (batch.empty()) continue;
    const cudaError_t error = hvd::emu::launch(stream, [batch](int device) {
      for (const auto& c : batch) {
        const auto bytes = static_cast<std::size_t>(c.bytes);
        const unsigned char* in = hvd::emu::DeviceMemory::get().access(c.src, bytes, device, "batched copy kernel (source)");
        unsigned char* out = hvd::emu::DeviceMemory::get().access(c.dst, bytes, device, "batched copy kernel (destination)");
        std::memmove(out, in, bytes);
      }
    });
    if (error != cudaSuccess) return error;
  }
  return cudaSuccess;
}

}  // namespace hvd::detail

namespace hvd::test {

cudaError_t launch_delayed_fill(float* data, std::int64_t count, float scale, long long nanoseconds,
                                cudaStream_t stream) {
  return hvd::emu::launch(stream, [=](int device) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(nanoseconds));
    unsigned char* out = hvd::emu::DeviceMemory::get().access(data, static_cast<std::size_t>(count) * sizeof(float),
                                                              device, "delayed fill kernel");
    for (std::int64_t i = 0; i < count; ++i) {
      const float v = static_cast<float>(i + 1) * scale;
      std::memcpy(out + i * sizeof(float), &v, sizeof v);
    }
  });
}

bool emulated() { return true; }

}  // namespace hvd::test
