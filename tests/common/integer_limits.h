// Integer values near the limits of each dtype, per rank, and what Sum, Min, Max, Product and
// Average over ranks give for them, computed in 128 bits: Sum and Product wrap modulo 2^bits,
// Min and Max are exact, Average is the exact sum divided by the size, truncated toward zero
// (Note [Integer averages are exact]). Shared by the host (MPI) and the NCCL tests, which must
// agree bit for bit.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "horovodcpp/horovod.h"

namespace hvd::test {

// Element i on rank r: near the top, near the bottom, both, and small values.
template <class T>
T limit_value(int r, std::int64_t i) {
  using L = std::numeric_limits<T>;
  const std::int64_t k = i % 8, j = i / 8 % 5;
  switch (k) {
    case 0: return static_cast<T>(L::max() - r - j);
    case 1: return L::max();
    case 2: return static_cast<T>(L::min() + r + j);
    case 3: return (r + j) % 2 ? L::max() : L::min();
    case 4: return static_cast<T>(r + j - 3);
    case 5: return static_cast<T>(L::min() < 0 ? -(r + 1) * (j + 1) : (r + 1) * (j + 1));
    case 6: return static_cast<T>(L::max() / 2 + r * 3 + j);
    default: return static_cast<T>(j % 2 ? 1 : (L::min() < 0 ? -1 : 2));  // for Product
  }
}

// Wraps a 128-bit integer into T modulo 2^bits (two's complement).
template <class T>
T wrap(__int128 v) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<unsigned __int128>(v)));
}

template <class T>
T limit_expected(ReduceOp op, std::int64_t i, int size) {
  __int128 acc = limit_value<T>(0, i);
  for (int r = 1; r < size; ++r) {
    const __int128 v = limit_value<T>(r, i);
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Average: acc += v; break;
      case ReduceOp::Min: acc = v < acc ? v : acc; break;
      case ReduceOp::Max: acc = v > acc ? v : acc; break;
      case ReduceOp::Product: acc = wrap<T>(acc * v); break;  // wrap each step: 128 bits can overflow too
      case ReduceOp::Adasum: break;                           // floating point only
    }
  }
  if (op == ReduceOp::Average) return static_cast<T>(acc / size);
  return wrap<T>(acc);
}

}  // namespace hvd::test
