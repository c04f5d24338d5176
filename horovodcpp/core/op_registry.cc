#include "core/op_registry.h"

#include <algorithm>
#include <cctype>

namespace hvd::detail {
namespace {
std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}
}  // namespace

void OpRegistry::add(ResponseType type, std::unique_ptr<CollectiveOp> op) {
  ops_[type].push_back(std::move(op));
}

bool OpRegistry::has_backend(const std::string& backend) const {
  for (const auto& [type, ops] : ops_)
    for (const auto& op : ops)
      if (lower(op->backend()) == lower(backend)) return true;
  return false;
}

CollectiveOp* OpRegistry::select(const Response& response, const std::vector<TensorTableEntry>& entries,
                                 const Communicator& group, const std::string& cpu_operations,
                                 const std::string& gpu_operations, std::string* why) const {
  const int device = entries.empty() ? response.device : entries.front().device;
  const bool on_gpu = device != kCpuDevice;
  const std::string& wanted = on_gpu ? gpu_operations : cpu_operations;
  auto it = ops_.find(response.type);
  if (it != ops_.end()) {
    for (const auto& op : it->second) {
      if (!wanted.empty() && lower(op->backend()) != wanted) continue;
      if (op->enabled(response, entries, group)) return op.get();
    }
  }
  if (why != nullptr) {
    *why = std::string("no backend in this build can run ") + response_type_name(response.type) + " on " +
           (on_gpu ? "GPU" : "host") + " tensors";
    if (!wanted.empty())
      *why += std::string(" with ") + (on_gpu ? "HOROVOD_GPU_OPERATIONS=" : "HOROVOD_CPU_OPERATIONS=") + wanted;
    else if (on_gpu)
      *why += " (GPU tensors need a build with CUDA and NCCL: the NCCL backend runs them, or stages them for MPI with HOROVOD_GPU_OPERATIONS=mpi)";
  }
  return nullptr;
}

}  // namespace hvd::detail
