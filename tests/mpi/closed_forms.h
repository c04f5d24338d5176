// The closed forms the multi-process collective tests check against, shared by their files:
// per-rank contributions exact in every dtype, the reduction each reduce op must produce, and a
// comparison that reports the first wrong elements.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <functional>

#include "test_support.h"

namespace hvd::test {

inline int count_mismatches(const HostTensor& t, const std::function<double(std::int64_t)>& expected) {
  int wrong = 0;
  for (std::int64_t i = 0; i < t.num_elements(); ++i)
    if (read_as_double(t, i) != expected(i)) {
      if (wrong < 5)
        UNSCOPED_INFO("element " << i << ": got " << read_as_double(t, i) << ", expected " << expected(i));
      ++wrong;
    }
  return wrong;
}

// Values small enough to be exact in every dtype, including int8 and float16 sums at np=4.
// Product uses 1 or 2 per rank instead, so that it stays exact too.
inline double contribution(ReduceOp op, int rank, std::int64_t i) {
  return op == ReduceOp::Product ? rank % 2 + 1 : (rank + 1) * (i % 5 + 1);
}

inline double expected_reduction(ReduceOp op, DataType dtype, int size, std::int64_t i) {
  const double k = i % 5 + 1;
  switch (op) {
    case ReduceOp::Sum: return size * (size + 1) / 2.0 * k;
    case ReduceOp::Average: {
      const double avg = (size + 1) / 2.0 * k;
      return is_integer(dtype) ? static_cast<double>(std::llround(avg)) : avg;
    }
    case ReduceOp::Min: return k;
    case ReduceOp::Max: return size * k;
    case ReduceOp::Product: return std::pow(2.0, size / 2);  // ranks contribute 1 or 2
  }
  return 0;
}

constexpr ReduceOp kAllReduceOps[] = {ReduceOp::Sum, ReduceOp::Average, ReduceOp::Min, ReduceOp::Max,
                                      ReduceOp::Product};

}  // namespace hvd::test
