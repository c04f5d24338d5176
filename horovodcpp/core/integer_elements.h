// One element of the integer arithmetic of Note [Integer averages are exact] and of integer
// scaling (core/host_scale.h), written once for the host and the device: core/integer_average.cc
// and core/host_scale.cc use it on the host, backends/nccl/nccl_kernels.cu in its kernels, so the
// NCCL path and the MPI path give the same bits. Nothing here includes a CUDA header: under nvcc
// the functions are also compiled for the device (HVD_HOST_DEVICE).
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define HVD_HOST_DEVICE __host__ __device__
#else
#define HVD_HOST_DEVICE
#endif

namespace hvd::detail::integer {

// The range of each integer dtype's C++ type (std::numeric_limits is not usable on the device).
template <class T> struct Range;
template <> struct Range<std::uint8_t> {
  static constexpr std::int64_t lo = 0, hi = 255;
};
template <> struct Range<std::int8_t> {
  static constexpr std::int64_t lo = -128, hi = 127;
};
template <> struct Range<std::int16_t> {
  static constexpr std::int64_t lo = -32768, hi = 32767;
};
template <> struct Range<std::int32_t> {
  static constexpr std::int64_t lo = -2147483647LL - 1, hi = 2147483647LL;
};
template <> struct Range<std::int64_t> {
  static constexpr std::int64_t lo = -9223372036854775807LL - 1, hi = 9223372036854775807LL;
};

// A scale factor as integers use it: a whole number below 2^62 multiplies exactly, any other
// goes through double. Decided once per buffer, on the host.
struct Factor {
  bool whole;
  std::int64_t value;  // when whole
  double factor;
};
inline Factor factor_of(double factor) {
  constexpr double kWhole = 4611686018427387904.0;  // 2^62
  if (std::trunc(factor) == factor && std::fabs(factor) < kWhole) return {true, static_cast<std::int64_t>(factor), factor};
  return {false, 0, factor};
}

// v * factor, truncated toward zero (as Horovod's scaling of integers in double is) and clamped
// to T's range (a bare conversion of an out-of-range double is undefined); NaN gives 0.
template <class T>
HVD_HOST_DEVICE T scaled(T v, const Factor& f) {
  if (f.whole) {  // |v| < 2^63 and |f| < 2^62: the product fits 128 bits
    const __int128 p = static_cast<__int128>(v) * f.value;
    if (p < Range<T>::lo) return static_cast<T>(Range<T>::lo);
    if (p > Range<T>::hi) return static_cast<T>(Range<T>::hi);
    return static_cast<T>(p);
  }
  const double x = static_cast<double>(v) * f.factor;
  if (!(x == x)) return 0;
  // hi as a double is 2^63 for int64 (max() rounds up to it): >= catches it.
  if (x <= static_cast<double>(Range<T>::lo)) return static_cast<T>(Range<T>::lo);
  if (x >= static_cast<double>(Range<T>::hi)) return static_cast<T>(Range<T>::hi);
  return static_cast<T>(x);
}

// int64 words per element while summing an Average: 2 for int64, 1 for the narrower types.
template <class T> struct Words {
  static constexpr int value = 1;
};
template <> struct Words<std::int64_t> {
  static constexpr int value = 2;
};

// Element v as Words<T> int64 words at `wide`. int64: x = hi * 2^32 + lo with hi = x >> 32
// (arithmetic shift) and lo the low 32 bits, unsigned; the sums of each over fewer than 2^31 ranks
// fit int64.
template <class T>
HVD_HOST_DEVICE void widen(T v, std::int64_t* wide) {
  if constexpr (Words<T>::value == 2) {
    wide[0] = static_cast<std::int64_t>(v) >> 32;
    wide[1] = static_cast<std::int64_t>(static_cast<std::uint64_t>(v) & 0xffffffffULL);
  } else {
    wide[0] = v;
  }
}

// The group's sum of widen's words for one element, divided by `divisor` (truncated toward
// zero). The quotient of values that fit T fits T. With divisor 1 the words may hold any int16
// reduction (Note [int16 reduces through int64 words on NCCL], backends/nccl/nccl_ops.h): the
// conversion keeps the low 16 bits, as int16 Sum and Product wrap.
template <class T>
HVD_HOST_DEVICE T finish(const std::int64_t* wide, int divisor) {
  if constexpr (Words<T>::value == 2) {
    const __int128 sum = static_cast<__int128>(wide[0]) * (static_cast<__int128>(1) << 32) + wide[1];
    return static_cast<T>(sum / divisor);
  } else {
    return static_cast<T>(wide[0] / divisor);  // |sum| < 2^31 * 2^31
  }
}

}  // namespace hvd::detail::integer
