// The one place that knows which backends this build contains, so the core never includes a
// backend header. Order matters: device backends first, so NCCL is preferred for GPU tensors.
#include "core/backend.h"

#include "backends/mpi/mpi_backend.h"
#include "backends/mpi/mpi_world.h"
#ifdef HVD_WITH_NCCL
#include <nccl.h>

#include "backends/nccl/nccl_backend.h"
#endif

namespace hvd::detail {

BuildFeatures compiled_features() {
  BuildFeatures features;
  features.mpi = true;
#ifdef HVD_WITH_NCCL
  features.nccl = true;
  features.cuda = true;
  features.nccl_version = NCCL_VERSION_CODE;
#endif
  return features;
}

std::unique_ptr<World> create_world(const Settings& settings) {
  return std::make_unique<MpiWorld>(settings.start_timeout_seconds);
}

std::vector<std::unique_ptr<Backend>> create_backends(World& world) {
  std::vector<std::unique_ptr<Backend>> backends;
#ifdef HVD_WITH_NCCL
  backends.push_back(make_nccl_backend(world));
#endif
  backends.push_back(make_mpi_backend(world));
  return backends;
}

}  // namespace hvd::detail
