// The bridge from torch tensors to the core's hvd::Tensor: TorchTensor holds a torch::Tensor
// alive for as long as the runtime references it, CudaReadyEvent marks when a CUDA producer has
// finished, and torch_allocator() creates outputs on the background thread. Internal to the
// torch front end (ops.cc, distributed_optimizer.cc, state_helpers.cc).
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>

#include "horovodcpp/horovod.h"

#ifdef HVD_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#endif

namespace hvd::torch::detail {

// "'name'" or "an unnamed tensor", for messages.
inline std::string describe(const std::string& name) {
  return name.empty() ? std::string("an unnamed tensor") : "'" + name + "'";
}

// The core dtype for a torch dtype; throws hvd::InvalidArgument naming the op, tensor and dtype.
inline DataType to_hvd_dtype(at::ScalarType type, const std::string& op, const std::string& name) {
  switch (type) {
    case at::kByte: return DataType::UInt8;
    case at::kChar: return DataType::Int8;
    case at::kShort: return DataType::Int16;
    case at::kInt: return DataType::Int32;
    case at::kLong: return DataType::Int64;
    case at::kHalf: return DataType::Float16;
    case at::kBFloat16: return DataType::BFloat16;
    case at::kFloat: return DataType::Float32;
    case at::kDouble: return DataType::Float64;
    default:
      throw InvalidArgument(op + " of " + describe(name) + ": dtype " + std::string(c10::toString(type)) +
                            " is not supported (use uint8, int8, int16, int32, int64, float16, bfloat16, float32 "
                            "or float64)");
  }
}

inline at::ScalarType to_torch_dtype(DataType type) {
  switch (type) {
    case DataType::UInt8: return at::kByte;
    case DataType::Int8: return at::kChar;
    case DataType::Int16: return at::kShort;
    case DataType::Int32: return at::kInt;
    case DataType::Int64: return at::kLong;
    case DataType::Float16: return at::kHalf;
    case DataType::BFloat16: return at::kBFloat16;
    case DataType::Float32: return at::kFloat;
    case DataType::Float64: return at::kDouble;
  }
  throw Error("unknown hvd::DataType");
}

// Rejects what the core cannot take, before anything is sent.
inline void check_tensor(const at::Tensor& t, const std::string& op, const std::string& name) {
  if (!t.defined()) throw InvalidArgument(op + " of " + describe(name) + ": the tensor is undefined");
  to_hvd_dtype(t.scalar_type(), op, name);
  if (!t.is_cpu() && !t.is_cuda())
    throw InvalidArgument(op + " of " + describe(name) + ": device " + t.device().str() +
                " is not supported (CPU or CUDA tensors only)");
  if (t.is_sparse()) throw InvalidArgument(op + " of " + describe(name) + ": sparse tensors are not supported (dense only)");
  if (!t.is_contiguous())
    throw InvalidArgument(op + " of " + describe(name) + ": the tensor is not contiguous (call .contiguous() first)");
}

// An hvd::Tensor over a contiguous torch tensor; holding it keeps the storage alive.
// Created on user threads (inputs) or the background thread (allocated outputs).
class TorchTensor final : public Tensor {
 public:
  explicit TorchTensor(at::Tensor tensor)
      : tensor_(std::move(tensor)),
        dtype_(to_hvd_dtype(tensor_.scalar_type(), "hvd::torch", "")),
        shape_(tensor_.sizes().begin(), tensor_.sizes().end()) {}
  DataType dtype() const override { return dtype_; }
  const TensorShape& shape() const override { return shape_; }
  void* data() override { return tensor_.data_ptr(); }
  int device() const override { return tensor_.is_cuda() ? tensor_.get_device() : kCpuDevice; }
  ReadyEventPtr allocation_event() const override { return allocated_; }
  void set_allocation_event(ReadyEventPtr event) { allocated_ = std::move(event); }
  const at::Tensor& tensor() const { return tensor_; }

 private:
  at::Tensor tensor_;
  DataType dtype_;
  TensorShape shape_;
  ReadyEventPtr allocated_;  // outputs from torch_allocator() on a CUDA device
};

inline std::shared_ptr<TorchTensor> wrap(const at::Tensor& t) { return std::make_shared<TorchTensor>(t); }

// The torch tensor behind an output the runtime produced with torch_allocator().
inline at::Tensor unwrap(const TensorPtr& t) {
  auto* torch_tensor = dynamic_cast<TorchTensor*>(t.get());
  if (torch_tensor == nullptr) throw Error("hvd::torch: the runtime returned an output that is not a torch tensor");
  return torch_tensor->tensor();
}

#ifdef HVD_TORCH_CUDA
// A CUDA event recorded on the producer's current stream; the NCCL backend waits on it.
class CudaReadyEvent final : public ReadyEvent {
 public:
  explicit CudaReadyEvent(const at::Tensor& t) : event_(cudaEventDisableTiming) {
    event_.record(at::cuda::getCurrentCUDAStream(t.get_device()));
  }
  bool ready() const override { return event_.query(); }
  void* cuda_event() const override { return static_cast<void*>(event_.event()); }

 private:
  at::cuda::CUDAEvent event_;
};
#endif

// Allocates outputs like `like` (same dtype family and device); runs on the background thread,
// where torch::empty is safe. The caching allocator hands out memory in the order of the
// thread's current stream, where work on a block's previous tensor may still be pending: a CUDA
// output carries an event recorded there after the allocation (Tensor::allocation_event), which
// the NCCL stream waits for before writing.
inline OutputAllocator torch_allocator(const at::Tensor& like) {
  const at::TensorOptions options = like.options();
  return [options](DataType dtype, const TensorShape& shape) -> TensorPtr {
    auto out = std::make_shared<TorchTensor>(at::empty(shape, options.dtype(to_torch_dtype(dtype))));
#ifdef HVD_TORCH_CUDA
    if (out->tensor().is_cuda()) out->set_allocation_event(std::make_shared<CudaReadyEvent>(out->tensor()));
#endif
    return out;
  };
}

// The producer's ready event for a tensor: none for host tensors.
inline ReadyEventPtr ready_event(const at::Tensor& t) {
#ifdef HVD_TORCH_CUDA
  if (t.is_cuda()) return std::make_shared<CudaReadyEvent>(t);
#endif
  (void)t;
  return nullptr;
}

}  // namespace hvd::torch::detail
