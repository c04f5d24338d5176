// Hierarchical allreduce on host memory (HOROVOD_HIERARCHICAL_ALLREDUCE=1): MPI reduce-scatter
// among the ranks of a node, allreduce of each rank's slice across nodes, allgather inside the
// node. Registered by the MPI backend ahead of the flat allreduce; it declines unless asked for
// and the world has several nodes of equal size. Background thread.
#pragma once

#include <memory>

#include "core/collective_op.h"

namespace hvd::detail {

class MpiWorld;
std::unique_ptr<CollectiveOp> make_mpi_hierarchical_allreduce(MpiWorld& world, OpContext& context);

}  // namespace hvd::detail
