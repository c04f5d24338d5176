#include "backends/mpi/mpi_backend.h"

#include "backends/mpi/mpi_adasum.h"
#include "backends/mpi/mpi_hierarchical_allreduce.h"
#include "backends/mpi/mpi_ops.h"
#include "backends/mpi/mpi_world.h"
#include "core/op_registry.h"

namespace hvd::detail {
namespace {

// Host collectives over the world's MPI communicators. Owned by the Runtime's backend list.
class MpiBackend final : public Backend {
 public:
  explicit MpiBackend(MpiWorld& world) : world_(world) {}
  const char* name() const override { return "MPI"; }
  void register_ops(OpRegistry& registry, OpContext& context) override {
    // Adasum first (the other allreduces decline it); hierarchical allreduce ahead of the flat one.
    registry.add(ResponseType::Allreduce, make_mpi_adasum(context));
    if (context.settings.hierarchical_allreduce && world_.local_size() > 1 && world_.cross_size() > 1 &&
        world_.homogeneous())
      registry.add(ResponseType::Allreduce, make_mpi_hierarchical_allreduce(world_, context));
    register_mpi_ops(registry, world_, context);
  }

 private:
  MpiWorld& world_;
};

}  // namespace

std::unique_ptr<Backend> make_mpi_backend(World& world) {
  auto* mpi_world = dynamic_cast<MpiWorld*>(&world);
  if (mpi_world == nullptr) throw std::runtime_error("internal: the MPI backend needs the MPI world");
  return std::make_unique<MpiBackend>(*mpi_world);
}

}  // namespace hvd::detail
