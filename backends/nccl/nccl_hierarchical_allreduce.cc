// Hierarchical allreduce on the GPU (HOROVOD_HIERARCHICAL_ALLREDUCE=1): NCCL reduce-scatter
// among the ranks of a node, MPI allreduce of each rank's slice across nodes through pinned host
// staging buffers, NCCL allgather inside the node. The fused buffer is padded to a multiple of
// the local size (padding zeroed), so every element count works, remainders included.
//
// The cross-node step is host MPI, so this op waits for the device-to-host copy on the
// background thread: the one place the NCCL backend blocks it on the GPU (as Horovod's own
// hierarchical allreduce does). The final allgather and copy out still complete asynchronously.
// One more 4-byte host allreduce over every rank tells all whether any failed before the
// cross-node step.
#include "backends/nccl/nccl_errors.h"
#include "backends/nccl/nccl_kernels.h"
#include "backends/nccl/nccl_ops.h"
#include "core/integer_average.h"
#include "timeline/timeline.h"
#include "timeline/timeline_cuda.h"

namespace hvd::detail {
namespace {

class NcclHierarchicalAllreduce final : public NcclOp {
 public:
  explicit NcclHierarchicalAllreduce(NcclContext& nccl) : NcclOp(nccl, "hierarchical allreduce") {}

  bool enabled(const Response& response, const std::vector<TensorTableEntry>& entries,
               const Communicator& group) const override {
    World& world = nccl_.world();
    // Node-local groups exist for the world only: process sets reduce flat.
    return NcclOp::enabled(response, entries, group) && group.id() == 0 &&
           nccl_.op_context().settings.hierarchical_allreduce && world.local_size() > 1 &&
           world.cross_size() > 1 && world.homogeneous();
  }

 protected:
  Status run(std::vector<TensorTableEntry>& entries, const Response& response,
             const Communicator& group) override {
    prepare(entries, response, group);
    ncclComm_t local = nccl_.local_comm();
    World& world = nccl_.world();
    const DataType dtype = response.dtype;
    const std::int64_t esize = dtype_size(dtype);
    cudaStream_t stream = nccl_.stream();

    // Sum-like inside the node; Average becomes Sum here and 1/size at the end (floats), or a
    // Sum of int64 words divided at the end (integers: ReducePlan::integer_average). int16
    // reduces through int64 words whatever the op (ReducePlan::through_words).
    ReducePlan plan = reduce_plan(response);
    ReduceOp cross_op = response.reduce_op;
    if (response.reduce_op == ReduceOp::Average) {
      plan.op = ncclSum;
      if (!plan.integer_average) plan.postscale = response.postscale_factor / world.size();
      cross_op = ReduceOp::Sum;
    }

    // The data in the dtype, then (through_words) the int64 words the steps below reduce; else
    // the steps reduce the data itself. The words start 64-byte aligned (layout.total is).
    const FusionLayout layout = fusion_layout(entries, dtype);
    const DataType work_dtype = plan.through_words ? DataType::Int64 : dtype;
    const ncclDataType_t work_type = plan.wire_type(dtype);
    const std::int64_t wsize = dtype_size(work_dtype);
    const std::int64_t work_total = plan.through_words ? layout.total * average_words(dtype) : layout.total;
    const std::int64_t data_bytes = plan.through_words ? layout.total * esize : 0;
    const std::int64_t local_size = world.local_size();
    const std::int64_t chunk = (work_total + local_size - 1) / local_size;
    const std::int64_t padded = chunk * local_size;
    auto* data = static_cast<unsigned char*>(nccl_.fusion_buffer(data_bytes + padded * wsize));
    unsigned char* work = data + data_bytes;
    void* host = nccl_.host_staging(chunk * wsize);

    Launch launch(nccl_);
    Timeline& timeline = nccl_.op_context().timeline;
    for (const auto& e : entries) timeline.activity_start(e.name, "MEMCPY_IN_FUSION_BUFFER");
    copy_into_fusion(entries, layout, data, dtype, stream, launch);
    for (const auto& e : entries) timeline.activity_end(e.name);
    if (plan.prescale != 1.0) {
      launch.local("prescale", [&] { return scale_device_buffer(data, layout.total, dtype, plan.prescale, stream); });
    }
    if (plan.through_words) {
      launch.local("widening integers into int64 words", [&] {
        return widen_device_for_average(data, layout.total, dtype, reinterpret_cast<std::int64_t*>(work), stream);
      });
    }
    if (padded > work_total) {
      launch.local("zeroing the fusion buffer padding", [&] {
        return cudaMemsetAsync(work + work_total * wsize, 0, (padded - work_total) * wsize, stream);
      });
    }
    nccl_.start_activity(entries, "NCCL_HIERARCHICAL_ALLREDUCE");
    unsigned char* slice = work + world.local_rank() * chunk * wsize;
    launch.collective("ncclReduceScatter (hierarchical)", local,
                      [&] { return ncclReduceScatter(work, slice, chunk, work_type, plan.op, local, stream); });
    launch.local("copying to the host staging buffer",
                 [&] { return cudaMemcpyAsync(host, slice, chunk * wsize, cudaMemcpyDeviceToHost, stream); });
    nccl_.finish_node_step(entries, name_, launch, "the intra-node reduce-scatter");
    // The host steps are collectives of every rank: they run whatever happened here, and the
    // ranks agree on whether any of them failed, so no rank reports a result that another
    // rank's garbage went into (see Note [Errors after NCCL work was enqueued]).
    Status cross = world.host_allreduce(host, chunk, work_dtype, cross_op, CommScope::Cross);
    if (!cross.is_ok()) launch.fail("cross-node MPI allreduce: " + cross.message());
    std::int32_t all_ok = launch.ok() ? 1 : 0;
    Status agreed = world.host_allreduce(&all_ok, 1, DataType::Int32, ReduceOp::Min, CommScope::Global);
    if (!agreed.is_ok()) launch.fail("agreeing on the outcome of the cross-node step: " + agreed.message());
    if (all_ok == 0) launch.fail("another rank failed its part of the hierarchical allreduce");
    launch.local("copying from the host staging buffer",
                 [&] { return cudaMemcpyAsync(slice, host, chunk * wsize, cudaMemcpyHostToDevice, stream); });
    launch.collective("ncclAllGather (hierarchical)", local,
                      [&] { return ncclAllGather(slice, work, chunk, work_type, local, stream); });
    launch.collectives_done();
    if (plan.through_words) {
      launch.local("narrowing the int64 words", [&] {
        return finish_device_average(reinterpret_cast<const std::int64_t*>(work), layout.total, dtype,
                                     plan.divisor(world.size()), data, stream);
      });
    }
    if (plan.postscale != 1.0) {
      launch.local("postscale", [&] { return scale_device_buffer(data, layout.total, dtype, plan.postscale, stream); });
    }
    switch_activity_on_stream(timeline, entries, "MEMCPY_OUT_FUSION_BUFFER", stream);
    copy_out_of_fusion(entries, layout, data, dtype, stream, launch);
    return nccl_.finish_async(entries, name_, launch);
  }
};

}  // namespace

std::unique_ptr<CollectiveOp> make_nccl_hierarchical_allreduce(NcclContext& nccl) {
  return std::make_unique<NcclHierarchicalAllreduce>(nccl);
}

}  // namespace hvd::detail
