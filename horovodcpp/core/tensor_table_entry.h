// One enqueued tensor operation as the runtime tracks it between enqueue and completion.
// Created by a user thread, moved into the TensorQueue, executed by the background thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/handle_state.h"
#include "core/message.h"

namespace hvd::detail {

struct TensorTableEntry {
  std::string name;
  RequestType type = RequestType::Allreduce;
  TensorPtr input;
  TensorPtr output;                 // null until allocated for allgather/alltoall/reducescatter
  OutputAllocator allocate_output;  // set for ops whose output shape is known only at execution
  ReadyEventPtr ready;
  int device = kCpuDevice;
  int root = 0;
  ReduceOp reduce_op = ReduceOp::Sum;
  double prescale_factor = 1.0;
  double postscale_factor = 1.0;
  std::vector<std::int64_t> splits;           // alltoall: rows sent to each rank
  std::vector<std::int64_t> received_splits;  // alltoall: filled by the op

  std::shared_ptr<HandleState> handle;  // null for the zero-filled stand-ins of a joined rank
  int handle_index = 0;
  std::int32_t process_set_id = 0;  // names are unique within a set, not across sets
};

// Allocates entry.output with `shape` and the input's dtype through the entry's allocator (host
// memory when it has none) and checks what came back. Throws std::runtime_error naming the tensor.
void allocate_output(TensorTableEntry& entry, const TensorShape& shape);

}  // namespace hvd::detail
