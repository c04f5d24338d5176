// The 16-bit float elements as the emulation's host code holds them (test-only), for the kernel
// twins and the emulated NCCL reductions alike: a float16 or bfloat16 element is its bits, its
// arithmetic is done in float as the CUDA kernels and NCCL do, and the conversions are the core's
// (core/half.h, round to nearest even), so the emulation rounds as the host path does.
// Every other element type is its own arithmetic type.
#pragma once

#include <cstdint>

#include "core/half.h"

namespace hvd::emu {

struct Half {
  std::uint16_t bits;
};
struct BFloat16 {
  std::uint16_t bits;
};

template <class T> struct Arithmetic { using type = T; };
template <> struct Arithmetic<Half> { using type = float; };
template <> struct Arithmetic<BFloat16> { using type = float; };

template <class T> typename Arithmetic<T>::type widen(T v) { return v; }
template <> inline float widen<Half>(Half v) { return detail::half_to_float(v.bits); }
template <> inline float widen<BFloat16>(BFloat16 v) { return detail::bfloat16_to_float(v.bits); }

template <class T> T narrow(typename Arithmetic<T>::type v) { return static_cast<T>(v); }
template <> inline Half narrow<Half>(float v) { return Half{detail::float_to_half(v)}; }
template <> inline BFloat16 narrow<BFloat16>(float v) { return BFloat16{detail::float_to_bfloat16(v)}; }

}  // namespace hvd::emu
