#include "core/host_scale.h"

#include <cmath>

#include "core/half.h"

namespace hvd::detail {
namespace {

// Integers round to nearest: 1/3 is inexact in binary, and truncating 6 * (1/3) would give 1.
template <class T>
void scale_integer(void* data, std::int64_t count, double factor) {
  T* p = static_cast<T*>(data);
  for (std::int64_t i = 0; i < count; ++i) p[i] = static_cast<T>(std::llround(p[i] * factor));
}

template <float (*ToFloat)(std::uint16_t), std::uint16_t (*FromFloat)(float)>
void scale_16(void* data, std::int64_t count, double factor) {
  auto* p = static_cast<std::uint16_t*>(data);
  const float f = static_cast<float>(factor);
  for (std::int64_t i = 0; i < count; ++i) p[i] = FromFloat(ToFloat(p[i]) * f);
}

}  // namespace

void scale_host_buffer(void* data, std::int64_t count, DataType dtype, double factor) {
  if (factor == 1.0 || count == 0) return;
  switch (dtype) {
    case DataType::UInt8: return scale_integer<std::uint8_t>(data, count, factor);
    case DataType::Int8: return scale_integer<std::int8_t>(data, count, factor);
    case DataType::Int32: return scale_integer<std::int32_t>(data, count, factor);
    case DataType::Int64: return scale_integer<std::int64_t>(data, count, factor);
    case DataType::Float16: return scale_16<half_to_float, float_to_half>(data, count, factor);
    case DataType::BFloat16: return scale_16<bfloat16_to_float, float_to_bfloat16>(data, count, factor);
    case DataType::Float32: {
      float* p = static_cast<float*>(data);
      const float f = static_cast<float>(factor);
      for (std::int64_t i = 0; i < count; ++i) p[i] *= f;
      return;
    }
    case DataType::Float64: {
      double* p = static_cast<double*>(data);
      for (std::int64_t i = 0; i < count; ++i) p[i] *= factor;
      return;
    }
  }
}

}  // namespace hvd::detail
