// The NCCL backend: collectives on CUDA device memory through one NCCL communicator per group.
// Registered by backends/compiled_backends.cc ahead of MPI, so it is preferred for device
// tensors; HOROVOD_GPU_OPERATIONS=mpi still selects CUDA-aware MPI instead.
#pragma once

#include <memory>

#include "core/backend.h"

namespace hvd::detail {

std::unique_ptr<Backend> make_nccl_backend(World& world);

}  // namespace hvd::detail
