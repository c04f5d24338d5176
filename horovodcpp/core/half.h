// IEEE float16 and bfloat16 <-> float conversions for host-side reductions and scaling.
// Round to nearest even; NaN and infinity preserved.
#pragma once

#include <cstdint>
#include <cstring>

namespace hvd::detail {

// A float's bits and back (std::bit_cast before C++20).
inline float float_from_bits(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline std::uint32_t bits_of_float(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

inline float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1f;
  std::uint32_t mantissa = h & 0x3ffu;
  std::uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    int shift = 0;
    while (!(mantissa & 0x400u)) {
      mantissa <<= 1;
      ++shift;
    }
    mantissa &= 0x3ffu;
    bits = sign | (static_cast<std::uint32_t>(113 - shift) << 23) | (mantissa << 13);
  }
  return float_from_bits(bits);
}

inline std::uint16_t float_to_half(float f) {
  const std::uint32_t bits = bits_of_float(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t abs = bits & 0x7fffffffu;
  if (abs >= 0x7f800000u) return sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0);  // inf / nan
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds past 65504: infinity
  if (abs < 0x38800000u) {                        // below the smallest normal: subnormal or zero
    if (abs < 0x33000000u) return sign;
    const std::uint32_t exponent = abs >> 23;
    const std::uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(exponent);  // 14..24
    std::uint32_t value = mantissa >> shift;
    const std::uint32_t rest = mantissa & ((1u << shift) - 1);
    const std::uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (value & 1))) ++value;
    return sign | static_cast<std::uint16_t>(value);
  }
  std::uint32_t value = ((abs >> 13) - (112u << 10));
  const std::uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (value & 1))) ++value;
  return sign | static_cast<std::uint16_t>(value);
}

inline float bfloat16_to_float(std::uint16_t b) { return float_from_bits(static_cast<std::uint32_t>(b) << 16); }

inline std::uint16_t float_to_bfloat16(float f) {
  const std::uint32_t bits = bits_of_float(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);  // quiet nan
  const std::uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

}  // namespace hvd::detail
