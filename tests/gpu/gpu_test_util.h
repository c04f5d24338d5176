// Test-only CUDA support for the GPU tests and the allreduce benchmark: a hvd::Tensor over
// cudaMalloc'd memory (no LibTorch needed), a ReadyEvent over a cudaEvent_t, dtype encoding of
// host values, and the skip rule (no device, or several ranks on one GPU with an NCCL that
// cannot share it). Used on the test's main thread.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "horovodcpp/horovod.h"

namespace hvd::test {

constexpr int kSkipReturnCode = 77;  // ctest SKIP_RETURN_CODE

void check_cuda(cudaError_t result, const char* what);

// Device memory owned by the tensor, on the device current when allocated: cudaMalloc'd, or
// (allocate_on) taken from the stream-ordered pool on `stream` and given back to it, as a
// caching allocator does: the memory may be another tensor's that work still pending on that
// stream uses, so its allocation_event() must complete before another stream writes it.
class DeviceTensor final : public Tensor {
 public:
  static std::shared_ptr<DeviceTensor> allocate(DataType dtype, TensorShape shape);
  static std::shared_ptr<DeviceTensor> allocate_on(cudaStream_t stream, DataType dtype, TensorShape shape);
  ~DeviceTensor() override;
  DataType dtype() const override { return dtype_; }
  const TensorShape& shape() const override { return shape_; }
  void* data() override { return data_; }
  int device() const override { return device_; }
  ReadyEventPtr allocation_event() const override { return allocated_; }

  // Encode/decode the dtype; synchronous (in the order of the tensor's stream, if it has one).
  void upload(const std::vector<double>& values);
  std::vector<double> download();

 private:
  DeviceTensor(DataType dtype, TensorShape shape) : dtype_(dtype), shape_(std::move(shape)) {}
  DataType dtype_;
  TensorShape shape_;
  void* data_ = nullptr;
  int device_ = 0;
  cudaStream_t stream_ = nullptr;  // set by allocate_on
  ReadyEventPtr allocated_;
};
using DeviceTensorPtr = std::shared_ptr<DeviceTensor>;

OutputAllocator device_allocator();
// Outputs from the stream-ordered pool of `stream` (DeviceTensor::allocate_on), as PyTorch's
// allocator gives them on the background thread's current stream.
OutputAllocator stream_allocator(cudaStream_t stream);

// A non-blocking stream that lives as long as its scope: declare it before the tensors allocated
// on it (allocate_on), so that they free themselves on it before it is destroyed (a cudaFreeAsync
// on a destroyed stream crashed on a real GPU). Synchronized before it is destroyed.
class OwnedStream {
 public:
  OwnedStream();
  ~OwnedStream();
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// A ready event recorded on a producer stream.
class CudaReadyEvent final : public ReadyEvent {
 public:
  explicit CudaReadyEvent(cudaStream_t stream);
  ~CudaReadyEvent() override;
  bool ready() const override { return cudaEventQuery(event_) == cudaSuccess; }
  void* cuda_event() const override { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

std::vector<unsigned char> encode(const std::vector<double>& values, DataType dtype);
std::vector<double> decode(const unsigned char* bytes, std::int64_t count, DataType dtype);
// What storing `value` in `dtype` gives back (rounding of float16/bfloat16, truncation of ints).
double round_trip(double value, DataType dtype);

// Empty when the GPU tests can run here, else why not. Call after hvd::init (uses local_size).
// Emulated devices are private to each process: several ranks never share one.
std::string gpu_skip_reason();
// Device count, 0 when the runtime reports none or fails.
int cuda_device_count();
// The start of a GPU test program: without a device, prints "SKIPPED: ..." naming `what` needs
// one and returns the skip code; else hvd::init(), and where the ranks cannot run here
// (gpu_skip_reason) rank 0 prints why, every rank shuts down and it returns the skip code; else
// each rank takes device local_rank % devices and it returns 0.
int start_on_gpu(const char* what);

// Test kernel (gpu_test_kernels.cu): spins for about `nanoseconds` on `stream`, then writes
// float values (i + 1) * scale into `data`.
cudaError_t launch_delayed_fill(float* data, std::int64_t count, float scale,
                                long long nanoseconds, cudaStream_t stream);
// False with the real runtime (gpu_test_kernels.cu), true in the emulated build, whose
// tests/gpu/emulation/kernel_twins.cc defines the twin of launch_delayed_fill and this.
bool emulated();

}  // namespace hvd::test
