// Adasum on host memory (ReduceOp::Adasum): Horovod's adaptive summation of the ranks' vectors,
// for a power-of-two number of ranks. Pairs of vectors a, b combine as
//   (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b
// (a sum when they are orthogonal, their mean when parallel), up a binary tree of the ranks, each
// tensor of a fused response with its own dot products. Registered by the MPI backend ahead of
// the other allreduces, which decline Adasum. Background thread.
#pragma once

#include <memory>

#include "core/collective_op.h"

namespace hvd::detail {

std::unique_ptr<CollectiveOp> make_mpi_adasum(OpContext& context);

}  // namespace hvd::detail
