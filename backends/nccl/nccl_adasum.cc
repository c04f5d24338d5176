// Adasum of the world's device tensors with several ranks per node: the node's average on NCCL
// over the node-local communicator, then (several nodes) Adasum across the nodes on the host.
// Every other Adasum of device tensors is the staged op's (nccl_staged_mpi_ops.cc).
#include "backends/nccl/nccl_errors.h"
#include "backends/nccl/nccl_kernels.h"
#include "backends/nccl/nccl_ops.h"
#include "core/op_registry.h"
#include "timeline/timeline.h"
#include "timeline/timeline_cuda.h"

namespace hvd::detail {

// Note [Adasum of device tensors averages within the node]
// Horovod built with NCCL reduces a GPU tensor's Adasum hierarchically: the ranks of a node
// average, then the nodes combine with Adasum (Horovod's docs, "Hierarchical"; its test expects
// the orthogonal sum divided by the local size). The same here, for the world's device tensors on
// several ranks per node of a homogeneous job: NcclAdasum averages on the GPU with NCCL; on one
// node that is the whole result, asynchronous like the other NCCL ops; on several it waits,
// stages the average in host memory and runs the MPI backend's Adasum on the cross communicator
// (each local rank on its own, with the same result), then copies back. Otherwise Adasum runs
// over the ranks themselves, staged through host memory by StagedMpiOp: with
// HOROVOD_GPU_OPERATIONS=mpi (Horovod built without NCCL), in process sets, with one rank per
// node, and on a non-homogeneous job (the last three under the name "NCCL" too, so that
// HOROVOD_GPU_OPERATIONS=nccl keeps them: StagedRole::AdasumOnNccl).
bool adasum_averages_within_node(const Response& response, const Communicator& group, const OpContext& context) {
  const World& world = context.world;
  return response.reduce_op == ReduceOp::Adasum && group.id() == 0 && context.settings.gpu_operations != "mpi" &&
         world.local_size() > 1 && world.homogeneous();
}

namespace {

class NcclAdasum final : public NcclOp {
 public:
  NcclAdasum(NcclContext& nccl, const OpRegistry& registry) : NcclOp(nccl, "Adasum"), registry_(registry) {}

  bool enabled(const Response& response, const std::vector<TensorTableEntry>& entries,
               const Communicator& group) const override {
    const int device = entries.empty() ? response.device : entries.front().device;
    return device != kCpuDevice && adasum_averages_within_node(response, group, nccl_.op_context());
  }

 protected:
  Status run(std::vector<TensorTableEntry>& entries, const Response& response,
             const Communicator& group) override {
    prepare(entries, response, group);
    ncclComm_t local = nccl_.local_comm();
    World& world = nccl_.world();
    const DataType dtype = response.dtype;
    if (!is_floating(dtype)) throw NcclFailure(std::string("Adasum of ") + dtype_name(dtype) + " tensors");
    const bool across = world.cross_size() > 1;
    const FusionLayout layout = fusion_layout(entries, dtype);
    const std::int64_t bytes = layout.total * dtype_size(dtype);
    auto* buffer = static_cast<unsigned char*>(nccl_.fusion_buffer(bytes));
    auto* host = across ? static_cast<unsigned char*>(nccl_.host_staging(bytes)) : nullptr;
    cudaStream_t stream = nccl_.stream();
    Timeline& timeline = nccl_.op_context().timeline;

    Launch launch(nccl_);
    for (const auto& e : entries) timeline.activity_start(e.name, "MEMCPY_IN_FUSION_BUFFER");
    copy_into_fusion(entries, layout, buffer, dtype, stream, launch);
    for (const auto& e : entries) timeline.activity_end(e.name);
    if (response.prescale_factor != 1.0) {
      launch.local("prescale",
                   [&] { return scale_device_buffer(buffer, layout.total, dtype, response.prescale_factor, stream); });
    }
    nccl_.start_activity(entries, "NCCL_ADASUM_NODE_AVERAGE");
    launch.collective("ncclAllReduce (the node's average)", local, [&] {
      return ncclAllReduce(buffer, buffer, layout.total, nccl_datatype(dtype), ncclAvg, local, stream);
    });
    if (across) {
      launch.local("copying the node's average to the host staging buffer",
                   [&] { return cudaMemcpyAsync(host, buffer, bytes, cudaMemcpyDeviceToHost, stream); });
      adasum_across_nodes(entries, response, layout, host, launch);
      nccl_.start_activity(entries, "MEMCPY_HOST_TO_DEVICE");
      launch.local("copying from the host staging buffer",
                   [&] { return cudaMemcpyAsync(buffer, host, bytes, cudaMemcpyHostToDevice, stream); });
    } else {
      launch.collectives_done();
      // On one node the cross-node step (Adasum of one vector) only applies the postscale.
      if (response.postscale_factor != 1.0) {
        launch.local("postscale",
                     [&] { return scale_device_buffer(buffer, layout.total, dtype, response.postscale_factor, stream); });
      }
    }
    switch_activity_on_stream(timeline, entries, "MEMCPY_OUT_FUSION_BUFFER", stream);
    copy_out_of_fusion(entries, layout, buffer, dtype, stream, launch);
    return nccl_.finish_async(entries, name_, launch);
  }

 private:
  // The host step, in place on `host` (the node's average once the stream has run), as Adasum of
  // one tensor per entry on world.cross(), with the response's postscale. Every rank runs it and
  // the ranks agree on the outcome whatever happened before, so no rank waits for a peer that
  // left, or reports a result another rank's garbage went into (Note [Errors after NCCL work was
  // enqueued]). A failure of the NCCL part aborts the communicators everywhere; one of the
  // Adasum itself (the same on every rank: a node count that is not a power of two) fails the
  // outputs only.
  void adasum_across_nodes(std::vector<TensorTableEntry>& entries, const Response& response,
                           const FusionLayout& layout, unsigned char* host, Launch& launch) {
    World& world = nccl_.world();
    std::string error;
    if (launch.ok() && !nccl_.wait_stream(&error)) launch.fail("waiting for the node's average: " + error);
    nccl_.abort_before_host_step(entries, name_, launch);
    Timeline& timeline = nccl_.op_context().timeline;
    for (const auto& e : entries) timeline.activity_end(e.name);  // the stream has run the average

    std::vector<TensorTableEntry> staged(entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i) {
      TensorTableEntry& h = staged[i];
      h.name = entries[i].name;
      h.type = entries[i].type;
      h.reduce_op = entries[i].reduce_op;
      h.process_set_id = entries[i].process_set_id;
      h.device = kCpuDevice;
      h.input = h.output = HostTensor::wrap(host + layout.offsets[i] * dtype_size(response.dtype), response.dtype,
                                           entries[i].input->shape());
    }
    Response across = response;
    across.device = kCpuDevice;
    across.prescale_factor = 1.0;  // applied before the average
    const Status adasum = run_mpi_op_on_host(registry_, staged, across, world.cross());

    // 0: some rank's NCCL part failed; 1: the Adasum failed; 2: neither.
    std::int32_t outcome = !launch.ok() ? 0 : adasum.is_ok() ? 2 : 1;
    const Status agreed = world.host_allreduce(&outcome, 1, DataType::Int32, ReduceOp::Min, CommScope::Global);
    if (!agreed.is_ok()) launch.fail("agreeing on the outcome of the cross-node step: " + agreed.message());
    if (outcome == 0) launch.fail("another rank failed its part of the node's average");
    launch.collectives_done();
    if (!adasum.is_ok()) launch.fail("Adasum across the nodes: " + adasum.message());
    if (outcome == 1) launch.fail("another node failed its part of the Adasum across the nodes");
  }

  const OpRegistry& registry_;
};

}  // namespace

std::unique_ptr<CollectiveOp> make_nccl_adasum(NcclContext& nccl, const OpRegistry& registry) {
  return std::make_unique<NcclAdasum>(nccl, registry);
}

}  // namespace hvd::detail
