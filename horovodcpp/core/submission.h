// A submitted tensor's entry and request, checked and filled on the caller's thread as its
// collective's traits (collective_traits.h) say, as request_checks.h decides what the coordinator
// compares across ranks: a collective with a tensor needs a valid input; one whose output the
// caller passes (allreduce, broadcast) needs it to match the input; one that needs a first
// dimension refuses a scalar; one that reduces carries the reduce op and scale factors; one that
// allocates its output carries the allocator. Bad input throws hvd::Error before anything is
// sent. Used by the public functions (api.cc), any user thread.
#pragma once

#include <string>

#include "core/message.h"
#include "core/tensor_table_entry.h"
#include "horovodcpp/horovod.h"

namespace hvd::detail {

// The reduction of a collective that reduces (traits.reduces).
struct Reduction {
  ReduceOp op = ReduceOp::Sum;
  double prescale_factor = 1.0;
  double postscale_factor = 1.0;
};

// From options that carry a reduction (AllreduceOptions, ReducescatterOptions).
template <class Options>
Reduction reduction_of(const Options& options) {
  return {options.op, options.prescale_factor, options.postscale_factor};
}

// What the caller passed for one tensor; a field the collective does not use is ignored.
struct Submitted {
  TensorPtr input;                  // null for join and barrier
  TensorPtr output;                 // the caller's output (allreduce, broadcast)
  OutputAllocator allocate_output;  // collectives that allocate their output
  ReadyEventPtr ready;
  Reduction reduction;              // collectives that reduce
};

// The entry of one tensor of `type` named `name`; `op` starts every message ("allgather",
// "grouped_allreduce"). Throws hvd::Error naming the operation, the tensor and what is wrong.
TensorTableEntry checked_entry(RequestType type, const std::string& op, const std::string& name, Submitted submitted);

// What the entry's rank tells the coordinator about it (the root of a collective that has one is
// the entry's, which broadcast sets once it found the root in the set).
Request request_for(const TensorTableEntry& entry);

}  // namespace hvd::detail
