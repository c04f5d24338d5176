// Helpers for the multi-process tests: host tensors filled from a formula, and reading them back.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include <horovodcpp/horovod.h>

#include "core/half.h"

namespace hvd::test {

inline double read_as_double(const HostTensor& t, std::int64_t i) {
  auto* p = const_cast<HostTensor&>(t).data();
  switch (t.dtype()) {
    case DataType::UInt8: return static_cast<const std::uint8_t*>(p)[i];
    case DataType::Int8: return static_cast<const std::int8_t*>(p)[i];
    case DataType::Int16: return static_cast<const std::int16_t*>(p)[i];
    case DataType::Int32: return static_cast<const std::int32_t*>(p)[i];
    case DataType::Int64: return static_cast<double>(static_cast<const std::int64_t*>(p)[i]);
    case DataType::Float16: return detail::half_to_float(static_cast<const std::uint16_t*>(p)[i]);
    case DataType::BFloat16: return detail::bfloat16_to_float(static_cast<const std::uint16_t*>(p)[i]);
    case DataType::Float32: return static_cast<const float*>(p)[i];
    case DataType::Float64: return static_cast<const double*>(p)[i];
  }
  return 0;
}

inline void write_from_double(HostTensor& t, std::int64_t i, double v) {
  void* p = t.data();
  switch (t.dtype()) {
    case DataType::UInt8: static_cast<std::uint8_t*>(p)[i] = static_cast<std::uint8_t>(v); break;
    case DataType::Int8: static_cast<std::int8_t*>(p)[i] = static_cast<std::int8_t>(v); break;
    case DataType::Int16: static_cast<std::int16_t*>(p)[i] = static_cast<std::int16_t>(v); break;
    case DataType::Int32: static_cast<std::int32_t*>(p)[i] = static_cast<std::int32_t>(v); break;
    case DataType::Int64: static_cast<std::int64_t*>(p)[i] = static_cast<std::int64_t>(v); break;
    case DataType::Float16: static_cast<std::uint16_t*>(p)[i] = detail::float_to_half(static_cast<float>(v)); break;
    case DataType::BFloat16:
      static_cast<std::uint16_t*>(p)[i] = detail::float_to_bfloat16(static_cast<float>(v));
      break;
    case DataType::Float32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DataType::Float64: static_cast<double*>(p)[i] = v; break;
  }
}

inline std::shared_ptr<HostTensor> filled(DataType dtype, TensorShape shape, const std::function<double(std::int64_t)>& f) {
  auto t = HostTensor::allocate(dtype, std::move(shape));
  for (std::int64_t i = 0; i < t->num_elements(); ++i) write_from_double(*t, i, f(i));
  return t;
}


}  // namespace hvd::test
