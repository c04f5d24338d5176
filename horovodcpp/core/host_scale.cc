#include "core/host_scale.h"

#include <cmath>
#include <limits>

#include "core/copy_bytes.h"
#include "core/half.h"

namespace hvd::detail {
namespace {

// Integers: truncated toward zero (as Horovod's scaling of integers in double is) and clamped
// to the dtype's range (a bare conversion of an out-of-range double is undefined). A factor that
// is a whole number multiplies in integer arithmetic, exact at any magnitude; any other goes
// through double, exact while |value * factor| < 2^53.
template <class T>
T clamp_to(double v) {
  constexpr double lo = static_cast<double>(std::numeric_limits<T>::min());
  // 2^63 as a double; max() itself rounds up to it for int64.
  constexpr double hi = static_cast<double>(std::numeric_limits<T>::max());
  if (!(v == v)) return 0;  // NaN (a NaN factor)
  if (v <= lo) return std::numeric_limits<T>::min();
  if (v >= hi) return std::numeric_limits<T>::max();
  return static_cast<T>(v);  // truncates toward zero
}

template <class T>
void scale_integer(T* to, const T* from, std::int64_t count, double factor) {
  constexpr double kWhole = 4611686018427387904.0;  // 2^62
  if (std::trunc(factor) == factor && std::fabs(factor) < kWhole) {
    const auto f = static_cast<std::int64_t>(factor);
    for (std::int64_t i = 0; i < count; ++i) {
      std::int64_t product;
      if (!__builtin_mul_overflow(static_cast<std::int64_t>(from[i]), f, &product) &&
          product >= std::numeric_limits<T>::min() && product <= std::numeric_limits<T>::max())
        to[i] = static_cast<T>(product);
      else
        to[i] = (from[i] < 0) != (f < 0) ? std::numeric_limits<T>::min() : std::numeric_limits<T>::max();
    }
    return;
  }
  for (std::int64_t i = 0; i < count; ++i) to[i] = clamp_to<T>(static_cast<double>(from[i]) * factor);
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
