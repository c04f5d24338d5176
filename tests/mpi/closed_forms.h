// What the multi-process collective tests compare with: the per-rank values and their reduction
// over ranks (tests/common/rank_reduction.h, shared with the GPU and hierarchical tests), and a
// comparison that reports the first wrong elements.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>

#include "test_support.h"
#include "tests/common/rank_reduction.h"

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

}  // namespace hvd::test
