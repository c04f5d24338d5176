// The emulated CUDA runtime API (test-only): the subset horovodcpp's NCCL backend and GPU tests
// call, with the signatures of the real cuda_runtime_api.h. See
// Note [What the emulated CUDA and NCCL model].
#include <cuda_runtime.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tests/gpu/emulation/device_memory.h"
#include "tests/gpu/emulation/emulation.h"
#include "tests/gpu/emulation/emulation_control.h"
#include "tests/gpu/emulation/streams.h"

using hvd::emu::DeviceMemory;
using hvd::emu::MemoryKind;
using hvd::emu::Stream;

namespace {

thread_local cudaError_t t_last_error = cudaSuccess;

// Every entry point returns through here, so cudaGetLastError sees failures as in CUDA.
cudaError_t result(cudaError_t error) {
  if (error != cudaSuccess) t_last_error = error;
  return error;
}

int device_count() { return hvd::emu::config().devices; }

bool valid_device(int device) { return device >= 0 && device < device_count(); }

bool is_device(const void* ptr) {
  const auto info = DeviceMemory::get().describe(ptr);
  return info.known ? info.kind == MemoryKind::Device : info.in_device_range;
}

bool is_pinned(const void* ptr) {
  const auto info = DeviceMemory::get().describe(ptr);
  return info.known && info.kind == MemoryKind::PinnedHost;
}

int device_of(const void* ptr) { return DeviceMemory::get().describe(ptr).device; }

// Host bytes of a host pointer, or of a device pointer as device work on its own device sees it.
unsigned char* bytes_of(const void* ptr, std::size_t count, const char* what) {
  if (!is_device(ptr)) return static_cast<unsigned char*>(const_cast<void*>(ptr));
  return DeviceMemory::get().access(ptr, count, device_of(ptr), what);
}

// The direction a cudaMemcpy kind names must match the pointers (CUDA leaves a mismatch undefined).
cudaError_t check_kind(void* dst, const void* src, cudaMemcpyKind kind) {
  const bool dst_device = is_device(dst), src_device = is_device(src);
  switch (kind) {
    case cudaMemcpyHostToHost: return !dst_device && !src_device ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyHostToDevice: return dst_device && !src_device ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDeviceToHost: return !dst_device && src_device ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDeviceToDevice: return dst_device && src_device ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDefault: return cudaSuccess;
  }
  return cudaErrorInvalidMemcpyDirection;
}

cudaError_t check_live(const void* ptr) {
  if (!is_device(ptr)) return cudaSuccess;
  const auto info = DeviceMemory::get().describe(ptr);
  return info.known && info.live ? cudaSuccess : cudaErrorInvalidValue;
}

}  // namespace

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return result(cudaErrorInvalidValue);
  *count = device_count();
  return device_count() == 0 ? result(cudaErrorNoDevice) : cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (!valid_device(device)) return result(cudaErrorInvalidDevice);
  hvd::emu::set_current_device(device);
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return result(cudaErrorInvalidValue);
  if (device_count() == 0) return result(cudaErrorNoDevice);
  *device = hvd::emu::current_device();
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (prop == nullptr) return result(cudaErrorInvalidValue);
  if (!valid_device(device)) return result(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof *prop);
  std::snprintf(prop->name, sizeof prop->name, "emulated device %d (horovodcpp tests, not a GPU)", device);
  prop->totalGlobalMem = DeviceMemory::get().arena_bytes();
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 1;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->unifiedAddressing = 1;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) {
  if (version == nullptr) return result(cudaErrorInvalidValue);
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) { return cudaDriverGetVersion(version); }

cudaError_t cudaDeviceSynchronize(void) {
  const int device = hvd::emu::current_device();
  hvd::emu::synchronize_device(device);
  return result(hvd::emu::sticky_error(device));
}

cudaError_t cudaGetLastError(void) {
  const cudaError_t error = t_last_error;
  t_last_error = cudaSuccess;
  return error;
}

cudaError_t cudaPeekAtLastError(void) { return t_last_error; }

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorLaunchOutOfResources: return "cudaErrorLaunchOutOfResources";
    default: return "cudaErrorUnknown";
  }
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
    default: return "unknown error";
  }
}

// --- memory ---------------------------------------------------------------------------------

cudaError_t cudaMalloc(void** ptr, size_t size) {
  return result(DeviceMemory::get().allocate(ptr, size, hvd::emu::current_device()));
}

// Synchronizes the device first, as CUDA's does: a caching allocator exists because of it.
cudaError_t cudaFree(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  const auto info = DeviceMemory::get().describe(ptr);
  if (!info.known || info.kind != MemoryKind::Device) return result(cudaErrorInvalidValue);
  hvd::emu::synchronize_device(info.device);
  return result(DeviceMemory::get().free(ptr));
}

cudaError_t cudaMallocHost(void** ptr, size_t size) { return result(DeviceMemory::get().allocate_host(ptr, size)); }

cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned int) { return cudaMallocHost(ptr, size); }

cudaError_t cudaFreeHost(void* ptr) {
  for (int d = 0; d < device_count(); ++d) hvd::emu::synchronize_device(d);
  return result(DeviceMemory::get().free_host(ptr));
}

cudaError_t cudaMallocAsync(void** ptr, size_t size, cudaStream_t handle) {
  auto stream = hvd::emu::resolve_stream(handle);
  if (!stream) return result(cudaErrorInvalidResourceHandle);
  const cudaError_t error = DeviceMemory::get().allocate_async(ptr, size, stream->device(), stream.get());
  if (error != cudaSuccess) return result(error);
  // The allocation point in stream order: what the block held before is garbage from here.
  void* block = *ptr;
  const int device = stream->device();
  hvd::emu::enqueue_on(*stream, [block, device] { DeviceMemory::get().poison(block, device); });
  return cudaSuccess;
}

cudaError_t cudaFreeAsync(void* ptr, cudaStream_t handle) {
  auto stream = hvd::emu::resolve_stream(handle);
  if (!stream) return result(cudaErrorInvalidResourceHandle);
  std::uint64_t ticket = 0;
  const cudaError_t error = DeviceMemory::get().free_async(ptr, stream.get(), &ticket);
  if (error != cudaSuccess) return result(error);
  const int device = stream->device();
  hvd::emu::enqueue_on(*stream, [ptr, ticket, device] {
    DeviceMemory::get().poison(ptr, device);
    DeviceMemory::get().free_reached(ptr, ticket);
  });
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  if (free == nullptr || total == nullptr) return result(cudaErrorInvalidValue);
  *total = DeviceMemory::get().arena_bytes();
  *free = *total / 2;
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* ptr) {
  if (attributes == nullptr) return result(cudaErrorInvalidValue);
  std::memset(attributes, 0, sizeof *attributes);
  const auto info = DeviceMemory::get().describe(ptr);
  attributes->device = -1;
  if (!info.known) {
    attributes->type = cudaMemoryTypeUnregistered;
    attributes->hostPointer = const_cast<void*>(ptr);
  } else if (info.kind == MemoryKind::PinnedHost) {
    attributes->type = cudaMemoryTypeHost;
    attributes->hostPointer = const_cast<void*>(ptr);
    attributes->devicePointer = const_cast<void*>(ptr);
  } else {
    attributes->type = cudaMemoryTypeDevice;
    attributes->device = info.device;
    attributes->devicePointer = const_cast<void*>(ptr);
  }
  return cudaSuccess;
}

// --- copies and sets ------------------------------------------------------------------------

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t handle) {
  if (count == 0) return cudaSuccess;
  if (cudaError_t e = check_kind(dst, src, kind); e != cudaSuccess) return result(e);
  if (check_live(dst) != cudaSuccess || check_live(src) != cudaSuccess) return result(cudaErrorInvalidValue);
  auto stream = hvd::emu::resolve_stream(handle);
  if (!stream) return result(cudaErrorInvalidResourceHandle);
  const bool dst_device = is_device(dst), src_device = is_device(src);
  if (dst_device && src_device)
    if (cudaError_t fault = hvd::emu::take_device_copy_fault(); fault != cudaSuccess) return result(fault);
  // Pageable host memory, as in CUDA: a copy from it is staged at the call; a copy to it
  // returns only once it is done. Pinned memory is read and written in stream order.
  if (!src_device && !is_pinned(src)) {
    auto staged = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char*>(src),
                                                                static_cast<const unsigned char*>(src) + count);
    hvd::emu::enqueue_on(*stream, [dst, count, staged] {
      std::memcpy(bytes_of(dst, count, "cudaMemcpyAsync"), staged->data(), count);
    });
    return cudaSuccess;
  }
  const std::uint64_t position = hvd::emu::enqueue_on(*stream, [dst, src, count] {
    std::memcpy(bytes_of(dst, count, "cudaMemcpyAsync"), bytes_of(src, count, "cudaMemcpyAsync"), count);
  });
  if (!dst_device && !is_pinned(dst)) stream->wait_for(position);
  return cudaSuccess;
}

// Synchronous, on the legacy default stream of the device involved.
cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  if (count == 0) return cudaSuccess;
  if (cudaError_t e = check_kind(dst, src, kind); e != cudaSuccess) return result(e);
  if (check_live(dst) != cudaSuccess || check_live(src) != cudaSuccess) return result(cudaErrorInvalidValue);
  const int device = is_device(dst) ? device_of(dst) : is_device(src) ? device_of(src) : hvd::emu::current_device();
  auto stream = hvd::emu::legacy_stream(device);
  const std::uint64_t position = hvd::emu::enqueue_on(*stream, [dst, src, count] {
    std::memcpy(bytes_of(dst, count, "cudaMemcpy"), bytes_of(src, count, "cudaMemcpy"), count);
  });
  stream->wait_for(position);
  return result(hvd::emu::sticky_error(device));
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t count, cudaStream_t handle) {
  if (count == 0) return cudaSuccess;
  if (!is_device(ptr) || check_live(ptr) != cudaSuccess) return result(cudaErrorInvalidValue);
  auto stream = hvd::emu::resolve_stream(handle);
  if (!stream) return result(cudaErrorInvalidResourceHandle);
  const int device = stream->device();
  hvd::emu::enqueue_on(*stream, [ptr, value, count, device] {
    std::memset(DeviceMemory::get().access(ptr, count, device, "cudaMemsetAsync"), value, count);
  });
  return cudaSuccess;
}

cudaError_t cudaMemset(void* ptr, int value, size_t count) {
  if (count == 0) return cudaSuccess;
  if (!is_device(ptr) || check_live(ptr) != cudaSuccess) return result(cudaErrorInvalidValue);
  const int device = device_of(ptr);
  auto stream = hvd::emu::legacy_stream(device);
  const std::uint64_t position = hvd::emu::enqueue_on(*stream, [ptr, value, count, device] {
    std::memset(DeviceMemory::get().access(ptr, count, device, "cudaMemset"), value, count);
  });
  stream->wait_for(position);
  return result(hvd::emu::sticky_error(device));
}

// --- streams and events ---------------------------------------------------------------------

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* handle, unsigned int flags) {
  if (handle == nullptr) return result(cudaErrorInvalidValue);
  if (device_count() == 0) return result(cudaErrorNoDevice);
  auto stream = hvd::emu::create_stream(hvd::emu::current_device(), (flags & cudaStreamNonBlocking) == 0);
  *handle = reinterpret_cast<cudaStream_t>(stream.get());
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* handle) { return cudaStreamCreateWithFlags(handle, cudaStreamDefault); }

cudaError_t cudaStreamDestroy(cudaStream_t handle) {
  return hvd::emu::destroy_stream(handle) ? cudaSuccess : result(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaStreamSynchronize(cudaStream_t handle) {
  auto stream = hvd::emu::resolve_stream(handle);
  if (!stream) return result(cudaErrorInvalidResourceHandle);
  stream->wait_for(stream->enqueued());
  return result(hvd::emu::sticky_error(stream->device()));
}

cudaError_t cudaStreamQuery(cudaStream_t handle) {
  auto stream = hvd::emu::resolve_stream(handle);
  if (!stream) return result(cudaErrorInvalidResourceHandle);
  if (cudaError_t e = hvd::emu::sticky_error(stream->device()); e != cudaSuccess) return result(e);
  return stream->reached(stream->enqueued()) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t handle, cudaEvent_t event_handle, unsigned int) {
  auto stream = hvd::emu::resolve_stream(handle);
  auto event = hvd::emu::resolve_event(event_handle);
  if (!stream || !event) return result(cudaErrorInvalidResourceHandle);
  event->make_wait(*stream);
  return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t handle, cudaHostFn_t fn, void* data) {
  auto stream = hvd::emu::resolve_stream(handle);
  if (!stream) return result(cudaErrorInvalidResourceHandle);
  if (fn == nullptr) return result(cudaErrorInvalidValue);
  hvd::emu::enqueue_on(*stream, [fn, data] { fn(data); });
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* handle, unsigned int) {
  if (handle == nullptr) return result(cudaErrorInvalidValue);
  *handle = reinterpret_cast<cudaEvent_t>(hvd::emu::create_event().get());
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* handle) { return cudaEventCreateWithFlags(handle, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t handle) {
  return hvd::emu::destroy_event(handle) ? cudaSuccess : result(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventRecord(cudaEvent_t handle, cudaStream_t stream_handle) {
  auto event = hvd::emu::resolve_event(handle);
  auto stream = hvd::emu::resolve_stream(stream_handle);
  if (!event || !stream) return result(cudaErrorInvalidResourceHandle);
  event->record(*stream);
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t handle) {
  auto event = hvd::emu::resolve_event(handle);
  if (!event) return result(cudaErrorInvalidResourceHandle);
  if (cudaError_t e = hvd::emu::sticky_error(hvd::emu::current_device()); e != cudaSuccess) return result(e);
  return event->query() ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t handle) {
  auto event = hvd::emu::resolve_event(handle);
  if (!event) return result(cudaErrorInvalidResourceHandle);
  event->synchronize();
  return result(hvd::emu::sticky_error(hvd::emu::current_device()));
}

}  // extern "C"
