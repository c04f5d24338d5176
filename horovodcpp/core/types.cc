// Plain helpers behind the public value types of horovod.h.
#include <sstream>

#include "horovodcpp/horovod.h"

namespace hvd {

const char* dtype_name(DataType dtype) {
  switch (dtype) {
    case DataType::UInt8: return "uint8";
    case DataType::Int8: return "int8";
    case DataType::Int16: return "int16";
    case DataType::Int32: return "int32";
    case DataType::Int64: return "int64";
    case DataType::Float16: return "float16";
    case DataType::BFloat16: return "bfloat16";
    case DataType::Float32: return "float32";
    case DataType::Float64: return "float64";
  }
  return "unknown";
}

std::int64_t dtype_size(DataType dtype) {
  switch (dtype) {
    case DataType::UInt8:
    case DataType::Int8: return 1;
    case DataType::Int16:
    case DataType::Float16:
    case DataType::BFloat16: return 2;
    case DataType::Int32:
    case DataType::Float32: return 4;
    case DataType::Int64:
    case DataType::Float64: return 8;
  }
  return 0;
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Average: return "Average";
    case ReduceOp::Sum: return "Sum";
    case ReduceOp::Min: return "Min";
    case ReduceOp::Max: return "Max";
    case ReduceOp::Product: return "Product";
    case ReduceOp::Adasum: return "Adasum";
  }
  return "unknown";
}

std::int64_t num_elements(const TensorShape& shape) {
  std::int64_t n = 1;
  for (auto d : shape)
    if (__builtin_mul_overflow(n, d, &n))
      throw Error("shape " + shape_string(shape) + " has more elements than fit in 64 bits");
  return n;
}

std::string shape_string(const TensorShape& shape) {
  std::ostringstream out;
  out << '[';
  for (std::size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}

std::shared_ptr<HostTensor> HostTensor::allocate(DataType dtype, TensorShape shape) {
  for (auto d : shape)
    if (d < 0) throw Error("HostTensor::allocate: negative dimension in shape " + shape_string(shape));
  std::shared_ptr<HostTensor> t(new HostTensor(dtype, std::move(shape)));
  t->owned_.assign(static_cast<std::size_t>(t->size_bytes()), 0);
  t->data_ = t->owned_.data();
  return t;
}

std::shared_ptr<HostTensor> HostTensor::wrap(void* data, DataType dtype, TensorShape shape) {
  std::shared_ptr<HostTensor> t(new HostTensor(dtype, std::move(shape)));
  if (data == nullptr && t->num_elements() > 0)
    throw Error("HostTensor::wrap: null data for shape " + shape_string(t->shape_));
  t->data_ = data;
  return t;
}

OutputAllocator host_allocator() {
  return [](DataType dtype, const TensorShape& shape) -> TensorPtr {
    return HostTensor::allocate(dtype, shape);
  };
}

}  // namespace hvd
