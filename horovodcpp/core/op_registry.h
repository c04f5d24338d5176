// The ordered list of collective ops per response type. Picks the first enabled op, honouring
// HOROVOD_CPU_OPERATIONS / HOROVOD_GPU_OPERATIONS. Built once at init, then read-only on the
// background thread.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/collective_op.h"

namespace hvd::detail {

class OpRegistry {
 public:
  void add(ResponseType type, std::unique_ptr<CollectiveOp> op);
  // The op to run the response on `group`, or nullptr with `why` explaining (e.g. the requested
  // backend is not built).
  CollectiveOp* select(const Response& response, const std::vector<TensorTableEntry>& entries,
                       const Communicator& group, const std::string& cpu_operations,
                       const std::string& gpu_operations, std::string* why) const;
  bool has_backend(const std::string& backend) const;

 private:
  std::map<ResponseType, std::vector<std::unique_ptr<CollectiveOp>>> ops_;
};

}  // namespace hvd::detail
