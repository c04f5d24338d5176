// The MPI backend: collectives on host memory (and on device memory when CUDA-aware MPI is
// asked for with HOROVOD_GPU_OPERATIONS=mpi). Registered by backends/compiled_backends.cc.
#pragma once

#include <memory>

#include "core/backend.h"

namespace hvd::detail {

// `world` must be the MpiWorld that create_world made.
std::unique_ptr<Backend> make_mpi_backend(World& world);

}  // namespace hvd::detail
