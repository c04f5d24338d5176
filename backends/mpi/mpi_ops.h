// The MPI collectives on host memory: allreduce, allgather and reducescatter (several tensors of
// a fused response in one call, through the host fusion buffer), broadcast, alltoall and barrier.
// Run on the background thread with blocking MPI calls: by the time a response executes every
// rank has agreed to it, so the data phase does not wait on stragglers.
#pragma once

#include "core/op_registry.h"

namespace hvd::detail {

class MpiWorld;
void register_mpi_ops(OpRegistry& registry, MpiWorld& world, OpContext& context);

}  // namespace hvd::detail
