// One collective on one backend. The OpRegistry asks each registered op, in order, whether it
// is enabled for a response and runs the first that is. Ops run on the background thread.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "core/fusion_buffer.h"
#include "core/message.h"
#include "core/settings.h"
#include "core/status.h"
#include "core/tensor_table_entry.h"
#include "core/world.h"

namespace hvd {
class Timeline;
}

namespace hvd::detail {

// What the Runtime hands every op: read-only settings, the world, the timeline and the host
// fusion buffer, plus `finish` for ops that complete their entries later (thread-safe), and
// the group (world or process set) whose response is executing, set before each execute().
struct OpContext {
  const Settings& settings;
  World& world;
  Timeline& timeline;
  FusionBuffer& host_fusion_buffer;
  std::function<void(std::vector<TensorTableEntry>& entries, const Status& status)> finish;
  Communicator* communicator = nullptr;
};

class CollectiveOp {
 public:
  virtual ~CollectiveOp() = default;
  virtual const char* backend() const = 0;  // "MPI", "NCCL": matched against HOROVOD_*_OPERATIONS
  virtual bool enabled(const Response& response, const std::vector<TensorTableEntry>& entries) const = 0;
  // Runs the collective for the entries of one (possibly fused) response. Returns Ok when every
  // output is final, InProgress when the op will call OpContext::finish itself, or an error.
  virtual Status execute(std::vector<TensorTableEntry>& entries, const Response& response) = 0;
};

}  // namespace hvd::detail
