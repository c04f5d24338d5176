// What the process-set tests share: whether this rank is a member, each rank's ramp of values and
// their closed-form sum over a set's members.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <horovodcpp/horovod.h>

#include "test_support.h"

namespace hvd::test {

inline bool is_member(const std::vector<int>& ranks) {
  for (int r : ranks)
    if (r == hvd::rank()) return true;
  return false;
}

// Element i on rank r: (r + 1) * i + offset.
inline std::shared_ptr<HostTensor> ramp(DataType dtype, TensorShape shape, double offset = 0) {
  const int r = hvd::rank();
  return filled(dtype, std::move(shape), [r, offset](std::int64_t i) { return (r + 1) * static_cast<double>(i) + offset; });
}

// Sum over `ranks` of (rank + 1) * i + offset: what an allreduce of ramp(offset) over them gives.
inline double member_sum(const std::vector<int>& ranks, std::int64_t i, double offset = 0) {
  double s = 0;
  for (int r : ranks) s += (r + 1) * static_cast<double>(i) + offset;
  return s;
}

}  // namespace hvd::test
