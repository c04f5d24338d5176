// The NCCL backend: collectives on CUDA device memory through one NCCL communicator per group.
// Registered by backends/compiled_backends.cc ahead of MPI, so it is preferred for device
// tensors; HOROVOD_GPU_OPERATIONS=mpi sends them to the MPI ops instead, staged through host memory
// (nccl_staged_mpi_ops.cc; no CUDA-aware MPI needed).
#pragma once

#include <memory>

#include "core/backend.h"

namespace hvd::detail {

std::unique_ptr<Backend> make_nccl_backend(World& world);

}  // namespace hvd::detail
