#include "core/host_scale.h"

#include "core/copy_bytes.h"
#include "core/half.h"
#include "core/integer_elements.h"

namespace hvd::detail {
namespace {

// Integers: see integer::scaled (the NCCL kernels use the same element function).
template <class T>
void scale_integer(T* to, const T* from, std::int64_t count, double factor) {
  const integer::Factor f = integer::factor_of(factor);
  for (std::int64_t i = 0; i < count; ++i) to[i] = integer::scaled(from[i], f);
}

template <float (*ToFloat)(std::uint16_t), std::uint16_t (*FromFloat)(float)>
void scale_16(std::uint16_t* to, const std::uint16_t* from, std::int64_t count, double factor) {
  const float f = static_cast<float>(factor);
  for (std::int64_t i = 0; i < count; ++i) to[i] = FromFloat(ToFloat(from[i]) * f);
}

// Two loops, so that neither needs a runtime overlap check: the compiler vectorizes both (see
// the compile options in horovodcpp/CMakeLists.txt). Scalar, scaling took several times a plain
// copy (docs/benchmarks.md, "Figures behind design choices").
template <class T, class F>
void scale_floating(T* to, const T* from, std::int64_t count, F factor) {
  if (to == from) {
    for (std::int64_t i = 0; i < count; ++i) to[i] *= factor;
    return;
  }
  T* __restrict out = to;
  const T* __restrict in = from;
  for (std::int64_t i = 0; i < count; ++i) out[i] = in[i] * factor;
}

template <class T>
T* as(void* p) {
  return static_cast<T*>(p);
}
template <class T>
const T* as(const void* p) {
  return static_cast<const T*>(p);
}

}  // namespace

void copy_scaled(void* to, const void* from, std::int64_t count, DataType dtype, double factor) {
  if (count <= 0) return;
  if (factor == 1.0) {
    if (to != from) copy_bytes(to, from, count * dtype_size(dtype));
    return;
  }
  switch (dtype) {
    case DataType::UInt8: return scale_integer(as<std::uint8_t>(to), as<std::uint8_t>(from), count, factor);
    case DataType::Int8: return scale_integer(as<std::int8_t>(to), as<std::int8_t>(from), count, factor);
    case DataType::Int16: return scale_integer(as<std::int16_t>(to), as<std::int16_t>(from), count, factor);
    case DataType::Int32: return scale_integer(as<std::int32_t>(to), as<std::int32_t>(from), count, factor);
    case DataType::Int64: return scale_integer(as<std::int64_t>(to), as<std::int64_t>(from), count, factor);
    case DataType::Float16:
      return scale_16<half_to_float, float_to_half>(as<std::uint16_t>(to), as<std::uint16_t>(from), count, factor);
    case DataType::BFloat16:
      return scale_16<bfloat16_to_float, float_to_bfloat16>(as<std::uint16_t>(to), as<std::uint16_t>(from), count,
                                                            factor);
    case DataType::Float32:
      return scale_floating(as<float>(to), as<float>(from), count, static_cast<float>(factor));
    case DataType::Float64: return scale_floating(as<double>(to), as<double>(from), count, factor);
  }
}

void scale_host_buffer(void* data, std::int64_t count, DataType dtype, double factor) {
  copy_scaled(data, data, count, dtype, factor);
}

}  // namespace hvd::detail
