// The closed form shared by the GPU and hierarchical allreduce tests: what each rank contributes
// (small integers, exact in every dtype, int8 included, at the sizes those tests run) and the
// reduce op over ranks of it, with scale factors and the truncation integer dtypes get. The caller
// stores the result in the dtype (its own round trip) before comparing.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "horovodcpp/horovod.h"

namespace hvd::test {

inline const std::vector<DataType> kEveryDtype = {DataType::UInt8,   DataType::Int8,    DataType::Int16,
                                                  DataType::Int32,   DataType::Int64,   DataType::Float16,
                                                  DataType::BFloat16, DataType::Float32, DataType::Float64};
inline const std::vector<ReduceOp> kEveryReduceOp = {ReduceOp::Sum, ReduceOp::Average, ReduceOp::Min,
                                                     ReduceOp::Max, ReduceOp::Product};

inline double rank_value(int rank, std::int64_t i, ReduceOp op) {
  if (op == ReduceOp::Product) return (rank % 3 + 1) * (i % 2 + 1);
  return (rank + 1) * (i % 5 + 1);
}

inline bool integer_dtype(DataType dtype) {
  return dtype == DataType::UInt8 || dtype == DataType::Int8 || dtype == DataType::Int16 ||
         dtype == DataType::Int32 || dtype == DataType::Int64;
}

// op over ranks 0..size-1 of rank_value(r, i) * prescale, then averaged and postscaled. Integer
// dtypes as the runtime computes them (Note [Integer averages are exact], core/integer_average.h):
// each scaling truncates toward zero, and Average is the exact sum divided by the size, truncated.
inline double reduced_over_ranks(ReduceOp op, std::int64_t i, DataType dtype, int size, double prescale = 1,
                                 double postscale = 1) {
  if (integer_dtype(dtype)) {
    auto scaled = [](std::int64_t v, double f) { return f == 1 ? v : static_cast<std::int64_t>(std::trunc(v * f)); };
    std::int64_t acc = scaled(static_cast<std::int64_t>(rank_value(0, i, op)), prescale);
    for (int r = 1; r < size; ++r) {
      const std::int64_t v = scaled(static_cast<std::int64_t>(rank_value(r, i, op)), prescale);
      if (op == ReduceOp::Sum || op == ReduceOp::Average) acc += v;
      if (op == ReduceOp::Min) acc = std::min(acc, v);
      if (op == ReduceOp::Max) acc = std::max(acc, v);
      if (op == ReduceOp::Product) acc *= v;
    }
    if (op == ReduceOp::Average) acc /= size;
    return static_cast<double>(scaled(acc, postscale));
  }
  double acc = rank_value(0, i, op) * prescale;
  for (int r = 1; r < size; ++r) {
    const double v = rank_value(r, i, op) * prescale;
    if (op == ReduceOp::Sum || op == ReduceOp::Average) acc += v;
    if (op == ReduceOp::Min) acc = std::min(acc, v);
    if (op == ReduceOp::Max) acc = std::max(acc, v);
    if (op == ReduceOp::Product) acc *= v;
  }
  if (op == ReduceOp::Average) acc *= 1.0 / size;
  return acc * postscale;
}

// Relative tolerance for comparing against the closed form in each dtype.
inline double tolerance(DataType dtype) {
  if (dtype == DataType::Float16 || dtype == DataType::BFloat16) return 1e-2;
  if (dtype == DataType::Float32) return 1e-5;
  return 1e-12;
}

}  // namespace hvd::test
