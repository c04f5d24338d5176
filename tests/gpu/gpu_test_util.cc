#include "tests/gpu/gpu_test_util.h"

#include <nccl.h>

#include <cmath>
#include <cstdio>

#include "core/half.h"

namespace hvd::test {

using detail::bfloat16_to_float;
using detail::float_to_bfloat16;
using detail::float_to_half;
using detail::half_to_float;

void check_cuda(cudaError_t result, const char* what) {
  if (result != cudaSuccess) throw Error(std::string(what) + ": " + cudaGetErrorString(result));
}

std::shared_ptr<DeviceTensor> DeviceTensor::allocate(DataType dtype, TensorShape shape) {
  std::shared_ptr<DeviceTensor> t(new DeviceTensor(dtype, std::move(shape)));
  check_cuda(cudaGetDevice(&t->device_), "cudaGetDevice");
  const std::int64_t bytes = t->size_bytes();
  check_cuda(cudaMalloc(&t->data_, bytes > 0 ? bytes : 1), "cudaMalloc");
  return t;
}

std::shared_ptr<DeviceTensor> DeviceTensor::allocate_on(cudaStream_t stream, DataType dtype, TensorShape shape) {
  std::shared_ptr<DeviceTensor> t(new DeviceTensor(dtype, std::move(shape)));
  check_cuda(cudaGetDevice(&t->device_), "cudaGetDevice");
  const std::int64_t bytes = t->size_bytes();
  check_cuda(cudaMallocAsync(&t->data_, bytes > 0 ? bytes : 1, stream), "cudaMallocAsync");
  t->stream_ = stream;
  t->allocated_ = std::make_shared<CudaReadyEvent>(stream);
  return t;
}

DeviceTensor::~DeviceTensor() {
  if (data_ == nullptr) return;
  if (stream_ != nullptr) {
    cudaFreeAsync(data_, stream_);
  } else {
    cudaFree(data_);
  }
}

void DeviceTensor::upload(const std::vector<double>& values) {
  auto bytes = encode(values, dtype_);
  if (stream_ != nullptr) {
    check_cuda(cudaMemcpyAsync(data_, bytes.data(), bytes.size(), cudaMemcpyHostToDevice, stream_), "upload");
    check_cuda(cudaStreamSynchronize(stream_), "upload");
    return;
  }
  check_cuda(cudaMemcpy(data_, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), "upload");
}

std::vector<double> DeviceTensor::download() {
  std::vector<unsigned char> bytes(static_cast<std::size_t>(size_bytes()));
  if (stream_ != nullptr) {
    check_cuda(cudaMemcpyAsync(bytes.data(), data_, bytes.size(), cudaMemcpyDeviceToHost, stream_), "download");
    check_cuda(cudaStreamSynchronize(stream_), "download");
  } else {
    check_cuda(cudaMemcpy(bytes.data(), data_, bytes.size(), cudaMemcpyDeviceToHost), "download");
  }
  return decode(bytes.data(), num_elements(), dtype_);
}

OutputAllocator device_allocator() {
  return [](DataType dtype, const TensorShape& shape) -> TensorPtr {
    return DeviceTensor::allocate(dtype, shape);
  };
}

OutputAllocator stream_allocator(cudaStream_t stream) {
  return [stream](DataType dtype, const TensorShape& shape) -> TensorPtr {
    return DeviceTensor::allocate_on(stream, dtype, shape);
  };
}

OwnedStream::OwnedStream() {
  check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
}

OwnedStream::~OwnedStream() {
  cudaStreamSynchronize(stream_);
  cudaStreamDestroy(stream_);
}

CudaReadyEvent::CudaReadyEvent(cudaStream_t stream) {
  check_cuda(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreate");
  check_cuda(cudaEventRecord(event_, stream), "cudaEventRecord");
}

CudaReadyEvent::~CudaReadyEvent() { cudaEventDestroy(event_); }

namespace {
template <class T>
void put(std::vector<unsigned char>& out, std::size_t i, T v) {
  std::memcpy(out.data() + i * sizeof(T), &v, sizeof(T));
}
template <class T>
T get(const unsigned char* in, std::int64_t i) {
  T v;
  std::memcpy(&v, in + i * sizeof(T), sizeof(T));
  return v;
}
}  // namespace

std::vector<unsigned char> encode(const std::vector<double>& values, DataType dtype) {
  std::vector<unsigned char> out(values.size() * dtype_size(dtype));
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    switch (dtype) {
      case DataType::UInt8: put(out, i, static_cast<std::uint8_t>(v)); break;
      case DataType::Int8: put(out, i, static_cast<std::int8_t>(v)); break;
      case DataType::Int16: put(out, i, static_cast<std::int16_t>(v)); break;
      case DataType::Int32: put(out, i, static_cast<std::int32_t>(v)); break;
      case DataType::Int64: put(out, i, static_cast<std::int64_t>(v)); break;
      case DataType::Float16: put(out, i, float_to_half(static_cast<float>(v))); break;
      case DataType::BFloat16: put(out, i, float_to_bfloat16(static_cast<float>(v))); break;
      case DataType::Float32: put(out, i, static_cast<float>(v)); break;
      case DataType::Float64: put(out, i, v); break;
    }
  }
  return out;
}

std::vector<double> decode(const unsigned char* bytes, std::int64_t count, DataType dtype) {
  std::vector<double> out(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    switch (dtype) {
      case DataType::UInt8: out[i] = get<std::uint8_t>(bytes, i); break;
      case DataType::Int8: out[i] = get<std::int8_t>(bytes, i); break;
      case DataType::Int16: out[i] = get<std::int16_t>(bytes, i); break;
      case DataType::Int32: out[i] = get<std::int32_t>(bytes, i); break;
      case DataType::Int64: out[i] = static_cast<double>(get<std::int64_t>(bytes, i)); break;
      case DataType::Float16: out[i] = half_to_float(get<std::uint16_t>(bytes, i)); break;
      case DataType::BFloat16: out[i] = bfloat16_to_float(get<std::uint16_t>(bytes, i)); break;
      case DataType::Float32: out[i] = get<float>(bytes, i); break;
      case DataType::Float64: out[i] = get<double>(bytes, i); break;
    }
  }
  return out;
}

double round_trip(double value, DataType dtype) {
  auto bytes = encode({value}, dtype);
  return decode(bytes.data(), 1, dtype)[0];
}

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

std::string gpu_skip_reason() {
  const int devices = cuda_device_count();
  if (devices == 0) return "no CUDA device is present (cudaGetDeviceCount reports none)";
  if (emulated()) return {};
  int version = 0;
  ncclGetVersion(&version);
  if (local_size() > devices && version < 23000) {
    return std::to_string(local_size()) + " ranks share " + std::to_string(devices) +
           " GPU(s) and NCCL " + std::to_string(version) +
           " is older than 2.30, which first allows several ranks per GPU";
  }
  return {};
}

int start_on_gpu(const char* what) {
  if (cuda_device_count() == 0) {
    std::printf("SKIPPED: no CUDA device is present (cudaGetDeviceCount reports none); %s needs a GPU\n", what);
    return kSkipReturnCode;
  }
  init();
  const std::string why = gpu_skip_reason();
  if (!why.empty()) {
    if (rank() == 0) std::printf("SKIPPED: %s\n", why.c_str());
    shutdown();
    return kSkipReturnCode;
  }
  check_cuda(cudaSetDevice(local_rank() % cuda_device_count()), "cudaSetDevice");
  return 0;
}

}  // namespace hvd::test
