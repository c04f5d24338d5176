// The timeline activity of the MPI ops (MEMCPY_IN_FUSION_BUFFER, MPI_ALLREDUCE, ...): marked on
// every entry's row for the lifetime of the object, so an early return closes it too.
#pragma once

#include <vector>

#include "core/tensor_table_entry.h"
#include "timeline/timeline.h"

namespace hvd::detail {

class Activity {
 public:
  Activity(Timeline& timeline, const std::vector<TensorTableEntry>& entries, const char* name)
      : timeline_(timeline), entries_(entries) {
    for (const auto& e : entries_) timeline_.activity_start(e.name, name);
  }
  ~Activity() {
    for (const auto& e : entries_) timeline_.activity_end(e.name);
  }
  Activity(const Activity&) = delete;
  Activity& operator=(const Activity&) = delete;

 private:
  Timeline& timeline_;
  const std::vector<TensorTableEntry>& entries_;
};

}  // namespace hvd::detail
