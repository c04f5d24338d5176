#include "backends/nccl/nccl_backend.h"

#include "backends/nccl/nccl_context.h"
#include "backends/nccl/nccl_ops.h"
#include "core/op_registry.h"

namespace hvd::detail {
namespace {

// Owns the NcclContext shared by its ops. Created on the background thread by the Runtime,
// which also calls register_ops and shutdown there.
class NcclBackend final : public Backend {
 public:
  explicit NcclBackend(World& world) : world_(world) {}
  const char* name() const override { return "NCCL"; }

  void register_ops(OpRegistry& registry, OpContext& context) override {
    context_ = std::make_unique<NcclContext>(world_, context);
    // Hierarchical first: it declines unless asked for and the topology has several nodes.
    registry.add(ResponseType::Allreduce, make_nccl_hierarchical_allreduce(*context_));
    registry.add(ResponseType::Allreduce, make_nccl_adasum(*context_, registry));  // the others decline Adasum
    registry.add(ResponseType::Allreduce, make_nccl_allreduce(*context_));
    registry.add(ResponseType::Allreduce, make_staged_mpi_op(registry, context, StagedRole::AdasumOnNccl));
    registry.add(ResponseType::Allgather, make_nccl_allgather(*context_));
    registry.add(ResponseType::Broadcast, make_nccl_broadcast(*context_));
    registry.add(ResponseType::Alltoall, make_nccl_alltoall(*context_));
    registry.add(ResponseType::Reducescatter, make_nccl_reducescatter(*context_));
    // HOROVOD_GPU_OPERATIONS=mpi: device tensors staged through host memory for the MPI ops.
    for (ResponseType type : {ResponseType::Allreduce, ResponseType::Allgather, ResponseType::Broadcast,
                              ResponseType::Alltoall, ResponseType::Reducescatter})
      registry.add(type, make_staged_mpi_op(registry, context, StagedRole::GpuOperationsMpi));
  }

  void shutdown(WorldEnd end) override {
    if (context_) context_->shutdown(end);
  }

  void peer_aborted(const std::string& notice) override {
    if (context_) context_->peer_aborted(notice);
  }

  void forget(const Communicator& group) override {
    if (context_) context_->forget(group);
  }

 private:
  World& world_;
  std::unique_ptr<NcclContext> context_;
};

}  // namespace

std::unique_ptr<Backend> make_nccl_backend(World& world) {
  return std::make_unique<NcclBackend>(world);
}

}  // namespace hvd::detail
