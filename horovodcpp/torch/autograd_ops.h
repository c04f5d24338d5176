// The differentiable forms of allreduce and allgather (autograd Functions whose backward is the
// matching collective). ops.cc routes hvd::torch::allreduce / allgather here when the input
// requires grad; SyncBatchNorm gathers its statistics through gather_rows. Internal.
#pragma once

#include <ATen/ATen.h>

#include "horovodcpp/torch.h"

namespace hvd::torch::detail {

at::Tensor differentiable_allreduce(const at::Tensor& tensor, const AllreduceOptions& options);
at::Tensor differentiable_allgather(const at::Tensor& tensor, const AllgatherOptions& options);
// allgather of a tensor whose first dimension is `rows` on every rank: the backward pass needs
// no exchange of sizes.
at::Tensor differentiable_allgather_uniform(const at::Tensor& tensor, const AllgatherOptions& options);

}  // namespace hvd::torch::detail
