// The MPI backend: collectives on host memory only. Device tensors reach these ops only staged
// through host memory by the NCCL backend (HOROVOD_GPU_OPERATIONS=mpi, nccl_staged_mpi_ops.cc).
// Registered by backends/compiled_backends.cc.
#pragma once

#include <memory>

#include "core/backend.h"

namespace hvd::detail {

// `world` must be the MpiWorld that create_world made.
std::unique_ptr<Backend> make_mpi_backend(World& world);

}  // namespace hvd::detail
