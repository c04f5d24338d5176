// Adasum of the world's device tensors with several ranks per node: the node's average on NCCL
// over the node-local communicator, then (several nodes) Adasum across the nodes on the host, of
// one chunk per local rank where the local size allows it.
// Every other Adasum of device tensors is the staged op's (nccl_staged_mpi_ops.cc).
#include <algorithm>

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
// several ranks per node of a homogeneous job. On one node the NCCL average (ncclAllReduce) is
// the whole result, asynchronous like the other NCCL ops. On several nodes with a power-of-two
// local size, as Horovod: ncclReduceScatter averages into one chunk per local rank, each rank
// copies only its chunk to host memory and runs Adasum across the nodes on it (Note [Adasum of a
// node's chunk] below), copies it back, and ncclAllGather rebuilds the buffer; so each vector
// crosses the nodes once, not local_size times. Another local size keeps the whole vector: local
// rank 0 stages the whole average in host memory, runs the MPI backend's Adasum on its cross
// communicator and copies the result back, and ncclBroadcast hands it to the node. Otherwise
// Adasum runs over the ranks themselves, staged through host memory by StagedMpiOp: with
// HOROVOD_GPU_OPERATIONS=mpi (Horovod built without NCCL), in process sets, with one rank per
// node, and on a non-homogeneous job (the last three under the name "NCCL" too, so that
// HOROVOD_GPU_OPERATIONS=nccl keeps them: StagedRole::AdasumOnNccl).
//
// Note [Adasum of a node's chunk]
// Adasum's coefficients need each tensor's dot products over the whole vectors, and a rank holds
// one chunk. The MPI backend's Adasum (Note [Adasum's tree], backends/mpi/mpi_adasum.cc)
// already sums each level's dot products over the level's block of ranks; run over every rank in
// node-major order (World::node_major(), built once at init: world ranks need not be node-major)
// from level local_size, the partner at each level is the same local rank of another node, so it
// holds the same chunk, and the block's sums also add the other local ranks' chunks. So each rank
// hands the MPI op its chunk's piece of every tensor (empty where a tensor lies elsewhere; the
// alignment gaps and the padding to equal chunks belong to no tensor) on the node-major group,
// and the op starts there. Chosen over a separate algorithm: one tree, whose host-only use stays
// as it was (level 1, whole vectors). Needs a power-of-two local size (the node is then one
// aligned block of the tree); another keeps the whole-vector step.
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
    const DataType dtype = response.dtype;
    if (!is_floating(dtype)) throw NcclFailure(std::string("Adasum of ") + dtype_name(dtype) + " tensors");
    World& world = nccl_.world();
    const int local_size = world.local_size(), nodes = world.cross_size();
    // The same verdict on every rank, before anything is enqueued: the job goes on.
    if (nodes & (nodes - 1))
      return Status::error("Adasum needs a power-of-two number of ranks, and the job has " + std::to_string(nodes) +
                           " nodes (device tensors average within each node, then combine across the nodes)");
    Communicator* node_major = world.node_major();
    if (nodes > 1 && node_major != nullptr && (local_size & (local_size - 1)) == 0)
      return run_in_chunks(entries, response, *node_major);
    return run_whole(entries, response);
  }

 private:
  // One node, or a local size that is not a power of two: the node's average of the whole
  // buffer, then (several nodes) Adasum of the whole average across the nodes by local rank 0
  // alone, on its world.cross(), broadcast to the node's other ranks. One rank per node rather
  // than each on its own cross communicator: those may order the nodes differently (a placement
  // that is not node-major), and Adasum's pairs with them, so the ranks of one node could end
  // with different results; and the vector crosses the nodes once, not local_size times.
  Status run_whole(std::vector<TensorTableEntry>& entries, const Response& response) {
    ncclComm_t local = nccl_.local_comm();
    World& world = nccl_.world();
    const DataType dtype = response.dtype;
    const bool across = world.cross_size() > 1;
    const FusionLayout layout = fusion_layout(entries, dtype);
    const std::int64_t bytes = layout.total * dtype_size(dtype);
    auto* buffer = static_cast<unsigned char*>(nccl_.fusion_buffer(bytes));
    auto* host = across ? static_cast<unsigned char*>(nccl_.host_staging(bytes)) : nullptr;
    cudaStream_t stream = nccl_.stream();
    Timeline& timeline = nccl_.op_context().timeline;

    Launch launch(nccl_);
    fuse_and_prescale(entries, response, layout, buffer, launch);
    nccl_.start_activity(entries, "NCCL_ADASUM_NODE_AVERAGE");
    launch.collective("ncclAllReduce (the node's average)", local, [&] {
      return ncclAllReduce(buffer, buffer, layout.total, nccl_datatype(dtype), ncclAvg, local, stream);
    });
    if (across) {
      const bool crosses = world.local_rank() == 0;
      if (crosses) {
        launch.local("copying the node's average to the host staging buffer",
                     [&] { return cudaMemcpyAsync(host, buffer, bytes, cudaMemcpyDeviceToHost, stream); });
      }
      adasum_across_nodes(entries, response, layout, crosses ? host : nullptr, launch);
      if (launch.ok()) {  // agreed: the same on every rank
        if (crosses) {
          nccl_.start_activity(entries, "MEMCPY_HOST_TO_DEVICE");
          launch.local("copying from the host staging buffer",
                       [&] { return cudaMemcpyAsync(buffer, host, bytes, cudaMemcpyHostToDevice, stream); });
        }
        switch_activity_on_stream(timeline, entries, "NCCL_BROADCAST", stream);
        launch.collective("ncclBroadcast (the Adasum from local rank 0)", local, [&] {
          return ncclBroadcast(buffer, buffer, layout.total, nccl_copy_datatype(dtype), 0, local, stream);
        });
      }
      launch.collectives_done();  // the MPI op applied the postscale
    } else {
      launch.collectives_done();
      // On one node the cross-node step (Adasum of one vector) only applies the postscale.
      postscale(response, buffer, layout.total, launch);
    }
    switch_activity_on_stream(timeline, entries, "MEMCPY_OUT_FUSION_BUFFER", stream);
    copy_out_of_fusion(entries, layout, buffer, dtype, stream, launch);
    return nccl_.finish_async(entries, name_, launch);
  }

  // Several nodes, local size a power of two (Note [Adasum of a node's chunk]): the node's
  // average reduce-scattered into local_size chunks, this rank's chunk through Adasum across the
  // nodes on the host, the chunks allgathered within the node.
  Status run_in_chunks(std::vector<TensorTableEntry>& entries, const Response& response,
                       const Communicator& node_major) {
    ncclComm_t local = nccl_.local_comm();
    World& world = nccl_.world();
    const DataType dtype = response.dtype;
    const std::int64_t esize = dtype_size(dtype);
    const FusionLayout layout = fusion_layout(entries, dtype);
    const std::int64_t local_size = world.local_size();
    // Padding to equal chunks belongs to no tensor.
    const std::int64_t chunk = (layout.total + local_size - 1) / local_size;
    const std::int64_t padded = chunk * local_size;
    const std::int64_t lo = world.local_rank() * chunk;
    auto* buffer = static_cast<unsigned char*>(nccl_.fusion_buffer(padded * esize));
    auto* host = static_cast<unsigned char*>(nccl_.host_staging(chunk * esize));
    unsigned char* slice = buffer + lo * esize;
    cudaStream_t stream = nccl_.stream();
    Timeline& timeline = nccl_.op_context().timeline;

    Launch launch(nccl_);
    fuse_and_prescale(entries, response, layout, buffer, launch);
    if (padded > layout.total) {
      launch.local("zeroing the fusion buffer padding", [&] {
        return cudaMemsetAsync(buffer + layout.total * esize, 0, (padded - layout.total) * esize, stream);
      });
    }
    nccl_.start_activity(entries, "NCCL_REDUCESCATTER");
    launch.collective("ncclReduceScatter (the node's average)", local, [&] {
      return ncclReduceScatter(buffer, slice, chunk, nccl_datatype(dtype), ncclAvg, local, stream);
    });
    switch_activity_on_stream(timeline, entries, "MEMCPY_DEVICE_TO_HOST", stream);
    launch.local("copying this rank's chunk of the node's average to the host staging buffer",
                 [&] { return cudaMemcpyAsync(host, slice, chunk * esize, cudaMemcpyDeviceToHost, stream); });
    nccl_.finish_node_step(entries, name_, launch, "the node's average");
    for (const auto& e : entries) timeline.activity_end(e.name);  // the stream has run the copy

    // Each tensor's piece of [lo, lo + chunk), possibly empty.
    std::vector<TensorTableEntry> staged(entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const std::int64_t from = std::clamp(layout.offsets[i], lo, lo + chunk);
      const std::int64_t to = std::clamp(layout.offsets[i] + entries[i].input->num_elements(), lo, lo + chunk);
      staged[i] = host_entry(entries[i], host + (from - lo) * esize, dtype, TensorShape{to - from});
    }
    const Status adasum = adasum_on_host(staged, response, node_major);
    agree_on_outcome(adasum, launch);
    if (!launch.ok()) {
      // The same on every rank (agreed): none enters the allgather.
      launch.collectives_done();
    } else {
      nccl_.start_activity(entries, "MEMCPY_HOST_TO_DEVICE");
      launch.local("copying from the host staging buffer",
                   [&] { return cudaMemcpyAsync(slice, host, chunk * esize, cudaMemcpyHostToDevice, stream); });
      switch_activity_on_stream(timeline, entries, "NCCL_ALLGATHER", stream);
      launch.collective("ncclAllGather (the chunks of the Adasum)", local, [&] {
        return ncclAllGather(slice, buffer, chunk, nccl_copy_datatype(dtype), local, stream);
      });
      launch.collectives_done();  // the MPI op applied the postscale
    }
    switch_activity_on_stream(timeline, entries, "MEMCPY_OUT_FUSION_BUFFER", stream);
    copy_out_of_fusion(entries, layout, buffer, dtype, stream, launch);
    return nccl_.finish_async(entries, name_, launch);
  }

  void fuse_and_prescale(const std::vector<TensorTableEntry>& entries, const Response& response,
                         const FusionLayout& layout, unsigned char* buffer, Launch& launch) {
    Timeline& timeline = nccl_.op_context().timeline;
    cudaStream_t stream = nccl_.stream();
    for (const auto& e : entries) timeline.activity_start(e.name, "MEMCPY_IN_FUSION_BUFFER");
    copy_into_fusion(entries, layout, buffer, response.dtype, stream, launch);
    for (const auto& e : entries) timeline.activity_end(e.name);
    if (response.prescale_factor != 1.0) {
      launch.local("prescale", [&] {
        return scale_device_buffer(buffer, layout.total, response.dtype, response.prescale_factor, stream);
      });
    }
  }

  void postscale(const Response& response, unsigned char* buffer, std::int64_t count, Launch& launch) {
    if (response.postscale_factor == 1.0) return;
    cudaStream_t stream = nccl_.stream();
    launch.local("postscale", [&] {
      return scale_device_buffer(buffer, count, response.dtype, response.postscale_factor, stream);
    });
  }

  // The whole-vector host step, in place on `host` (the node's average once the stream has run),
  // as Adasum of one tensor per entry on world.cross(), with the response's postscale; a rank
  // without `host` (not local rank 0) only waits for its part of the average, and agrees.
  void adasum_across_nodes(std::vector<TensorTableEntry>& entries, const Response& response,
                           const FusionLayout& layout, unsigned char* host, Launch& launch) {
    World& world = nccl_.world();
    nccl_.finish_node_step(entries, name_, launch, "the node's average");
    Timeline& timeline = nccl_.op_context().timeline;
    for (const auto& e : entries) timeline.activity_end(e.name);  // the stream has run the average
    if (host == nullptr) {
      agree_on_outcome(Status::ok(), launch);
      return;
    }

    std::vector<TensorTableEntry> staged(entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i)
      staged[i] = host_entry(entries[i], host + layout.offsets[i] * dtype_size(response.dtype), response.dtype,
                             entries[i].input->shape());
    const Status adasum = adasum_on_host(staged, response, world.cross());
    agree_on_outcome(adasum, launch);
  }

  // The MPI backend's Adasum of `staged` (host stand-ins, host_entry) on `group`, with the
  // response's postscale; its prescale was applied before the average.
  Status adasum_on_host(std::vector<TensorTableEntry>& staged, const Response& response, const Communicator& group) {
    Response across = response;
    across.device = kCpuDevice;
    across.prescale_factor = 1.0;
    return run_mpi_op_on_host(registry_, staged, across, group);
  }

  // `e`'s stand-in for the MPI op: `shape` at `data` in host memory, reduced in place.
  static TensorTableEntry host_entry(const TensorTableEntry& e, unsigned char* data, DataType dtype,
                                     TensorShape shape) {
    TensorTableEntry h;
    h.name = e.name;
    h.type = e.type;
    h.reduce_op = e.reduce_op;
    h.process_set_id = e.process_set_id;
    h.device = kCpuDevice;
    h.input = h.output = HostTensor::wrap(data, dtype, std::move(shape));
    return h;
  }

  // Every rank runs the host step and the ranks agree on its outcome whatever happened before,
  // so no rank waits for a peer that left, or reports a result another rank's garbage went into
  // (Note [Errors after NCCL work was enqueued]). A failure of the NCCL part aborts the
  // communicators everywhere; one of the Adasum itself (the same on every rank: a node count
  // that is not a power of two) fails the outputs only.
  void agree_on_outcome(const Status& adasum, Launch& launch) {
    // 0: some rank's NCCL part failed; 1: the Adasum failed; 2: neither.
    std::int32_t outcome = !launch.ok() ? 0 : adasum.is_ok() ? 2 : 1;
    const Status agreed =
        nccl_.world().host_allreduce(&outcome, 1, DataType::Int32, ReduceOp::Min, CommScope::Global);
    if (!agreed.is_ok()) launch.fail("agreeing on the outcome of the cross-node step: " + agreed.message());
    if (outcome == 0) launch.fail("another rank failed its part of the node's average");
    if (outcome == 2) return;
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
