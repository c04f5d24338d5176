// Device kernels for the NCCL backend; see nccl_kernels.h.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "backends/nccl/nccl_kernels.h"
#include "core/integer_elements.h"

namespace hvd::detail {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 4096;
constexpr int kCopiesPerLaunch = 32;  // keeps the by-value kernel argument well under 4 KB

// How each floating dtype is scaled: the arithmetic type it is widened to.
template <class T> struct Widen { using type = double; };
template <> struct Widen<float> { using type = float; };
template <> struct Widen<__half> { using type = float; };
template <> struct Widen<__nv_bfloat16> { using type = float; };

template <class T> __device__ T narrow(typename Widen<T>::type v) { return static_cast<T>(v); }
template <> __device__ __half narrow<__half>(float v) { return __float2half(v); }
template <> __device__ __nv_bfloat16 narrow<__nv_bfloat16>(float v) { return __float2bfloat16(v); }
template <class T> __device__ typename Widen<T>::type widen(T v) {
  return static_cast<typename Widen<T>::type>(v);
}
template <> __device__ float widen<__half>(__half v) { return __half2float(v); }
template <> __device__ float widen<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

#define HVD_GRID_STRIDE(i, count)                                                   \
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < (count); \
       i += std::int64_t(gridDim.x) * blockDim.x)

template <class T>
__global__ void scale_kernel(const T* src, T* dst, std::int64_t count, double factor) {
  using W = typename Widen<T>::type;
  const W f = static_cast<W>(factor);
  HVD_GRID_STRIDE(i, count) { dst[i] = narrow<T>(widen(src[i]) * f); }
}

template <class T>
__global__ void scale_integer_kernel(const T* src, T* dst, std::int64_t count, integer::Factor factor) {
  HVD_GRID_STRIDE(i, count) { dst[i] = integer::scaled(src[i], factor); }
}

template <class T>
__global__ void widen_kernel(const T* src, std::int64_t count, std::int64_t* wide) {
  HVD_GRID_STRIDE(i, count) { integer::widen(src[i], wide + i * integer::Words<T>::value); }
}

template <class T>
__global__ void finish_kernel(const std::int64_t* wide, std::int64_t count, int divisor, T* dst) {
  HVD_GRID_STRIDE(i, count) { dst[i] = integer::finish<T>(wide + i * integer::Words<T>::value, divisor); }
}

int blocks_for(std::int64_t count) {
  std::int64_t blocks = (count + kThreads - 1) / kThreads;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  return static_cast<int>(blocks);
}

template <class T>
cudaError_t launch_scale(const void* src, void* dst, std::int64_t count, double factor,
                         cudaStream_t stream) {
  if constexpr (std::is_integral<T>::value) {
    scale_integer_kernel<T><<<blocks_for(count), kThreads, 0, stream>>>(
        static_cast<const T*>(src), static_cast<T*>(dst), count, integer::factor_of(factor));
  } else {
    scale_kernel<T><<<blocks_for(count), kThreads, 0, stream>>>(
        static_cast<const T*>(src), static_cast<T*>(dst), count, factor);
  }
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_widen(const void* src, std::int64_t count, std::int64_t* wide, cudaStream_t stream) {
  widen_kernel<T><<<blocks_for(count), kThreads, 0, stream>>>(static_cast<const T*>(src), count, wide);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_finish(const std::int64_t* wide, std::int64_t count, int divisor, void* dst,
                          cudaStream_t stream) {
  finish_kernel<T><<<blocks_for(count), kThreads, 0, stream>>>(wide, count, divisor, static_cast<T*>(dst));
  return cudaGetLastError();
}

struct CopyBatch {
  DeviceCopy copies[kCopiesPerLaunch];
};

// blockIdx.y picks the copy; blocks along x stride over its bytes. 16-byte moves when both
// pointers and the length allow it, bytes otherwise (tensor views may be oddly aligned).
__global__ void batched_copy_kernel(CopyBatch batch) {
  const DeviceCopy c = batch.copies[blockIdx.y];
  const auto src = reinterpret_cast<std::uintptr_t>(c.src);
  const auto dst = reinterpret_cast<std::uintptr_t>(c.dst);
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  const std::int64_t first = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
  std::int64_t done = 0;
  if (((src | dst) & 15) == 0) {
    const std::int64_t vectors = c.bytes / 16;
    const uint4* s = reinterpret_cast<const uint4*>(c.src);
    uint4* d = reinterpret_cast<uint4*>(c.dst);
    for (std::int64_t i = first; i < vectors; i += stride) d[i] = s[i];
    done = vectors * 16;
  }
  const auto* s = static_cast<const unsigned char*>(c.src);
  auto* d = static_cast<unsigned char*>(c.dst);
  for (std::int64_t i = done + first; i < c.bytes; i += stride) d[i] = s[i];
}

}  // namespace

cudaError_t scale_device_copy(const void* src, void* dst, std::int64_t count, DataType dtype,
                              double factor, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  switch (dtype) {
    case DataType::UInt8: return launch_scale<std::uint8_t>(src, dst, count, factor, stream);
    case DataType::Int8: return launch_scale<std::int8_t>(src, dst, count, factor, stream);
    case DataType::Int16: return launch_scale<std::int16_t>(src, dst, count, factor, stream);
    case DataType::Int32: return launch_scale<std::int32_t>(src, dst, count, factor, stream);
    case DataType::Int64: return launch_scale<std::int64_t>(src, dst, count, factor, stream);
    case DataType::Float16: return launch_scale<__half>(src, dst, count, factor, stream);
    case DataType::BFloat16: return launch_scale<__nv_bfloat16>(src, dst, count, factor, stream);
    case DataType::Float32: return launch_scale<float>(src, dst, count, factor, stream);
    case DataType::Float64: return launch_scale<double>(src, dst, count, factor, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t widen_device_for_average(const void* src, std::int64_t count, DataType dtype, std::int64_t* wide,
                                     cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  switch (dtype) {
    case DataType::UInt8: return launch_widen<std::uint8_t>(src, count, wide, stream);
    case DataType::Int8: return launch_widen<std::int8_t>(src, count, wide, stream);
    case DataType::Int16: return launch_widen<std::int16_t>(src, count, wide, stream);
    case DataType::Int32: return launch_widen<std::int32_t>(src, count, wide, stream);
    case DataType::Int64: return launch_widen<std::int64_t>(src, count, wide, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t finish_device_average(const std::int64_t* wide, std::int64_t count, DataType dtype, int divisor,
                                  void* dst, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  if (divisor < 1) return cudaErrorInvalidValue;
  switch (dtype) {
    case DataType::UInt8: return launch_finish<std::uint8_t>(wide, count, divisor, dst, stream);
    case DataType::Int8: return launch_finish<std::int8_t>(wide, count, divisor, dst, stream);
    case DataType::Int16: return launch_finish<std::int16_t>(wide, count, divisor, dst, stream);
    case DataType::Int32: return launch_finish<std::int32_t>(wide, count, divisor, dst, stream);
    case DataType::Int64: return launch_finish<std::int64_t>(wide, count, divisor, dst, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t scale_device_buffer(void* data, std::int64_t count, DataType dtype, double factor,
                                cudaStream_t stream) {
  return scale_device_copy(data, data, count, dtype, factor, stream);
}

cudaError_t batched_device_copy(const std::vector<DeviceCopy>& copies, cudaStream_t stream) {
  for (std::size_t start = 0; start < copies.size(); start += kCopiesPerLaunch) {
    CopyBatch batch{};
    int n = 0;
    std::int64_t largest = 0;
    const std::size_t end = std::min(copies.size(), start + kCopiesPerLaunch);
    for (std::size_t i = start; i < end; ++i) {
      if (copies[i].bytes <= 0) continue;
      batch.copies[n++] = copies[i];
      if (copies[i].bytes > largest) largest = copies[i].bytes;
    }
    if (n == 0) continue;
    std::int64_t blocks = (largest / 16 + kThreads - 1) / kThreads;
    if (blocks < 1) blocks = 1;
    if (blocks > kMaxBlocks / n + 1) blocks = kMaxBlocks / n + 1;
    batched_copy_kernel<<<dim3(static_cast<unsigned>(blocks), n), kThreads, 0, stream>>>(batch);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace hvd::detail
