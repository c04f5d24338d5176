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

// What the Runtime hands every op once, at registration: read-only settings, the world, the
// timeline and the host fusion buffer, plus `finish` for ops that complete their entries later
// (thread-safe). The group a response runs on is not here: it is an argument of each call.
struct OpContext {
  const Settings& settings;
  World& world;
  Timeline& timeline;
  FusionBuffer& host_fusion_buffer;
  std::function<void(std::vector<TensorTableEntry>& entries, const Status& status)> finish;
  // This rank aborted its side of the backend's collectives for a failure that concerns its peers,
  // who may not learn of it otherwise (NCCL reports no abort between the GPUs of one node): every
  // other rank's backends get `notice` (Backend::peer_aborted) at their watchdog's next tick.
  // Any thread.
  std::function<void(const std::string& notice)> report_abort;
};

class CollectiveOp {
 public:
  virtual ~CollectiveOp() = default;
  virtual const char* backend() const = 0;  // "MPI", "NCCL": matched against HOROVOD_*_OPERATIONS
  // Whether this op can run the response on `group` (the world or a process set).
  virtual bool enabled(const Response& response, const std::vector<TensorTableEntry>& entries,
                       const Communicator& group) const = 0;
  // Runs the collective for the entries of one (possibly fused) response among the ranks of
  // `group`. Returns Ok when every output is final, InProgress when the op will call
  // OpContext::finish itself, or an error.
  virtual Status execute(std::vector<TensorTableEntry>& entries, const Response& response,
                         const Communicator& group) = 0;
};

}  // namespace hvd::detail
