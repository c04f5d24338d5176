// Allreduce on NCCL, and the fusion-buffer helpers it shares with hierarchical allreduce.
#include "backends/nccl/nccl_errors.h"
#include "backends/nccl/nccl_kernels.h"
#include "backends/nccl/nccl_ops.h"
#include "timeline/timeline.h"
#include "timeline/timeline_cuda.h"

namespace hvd::detail {

FusionLayout fusion_layout(const std::vector<TensorTableEntry>& entries, DataType dtype) {
  constexpr std::int64_t kAlignBytes = 64;
  const std::int64_t align = kAlignBytes / dtype_size(dtype);
  FusionLayout layout;
  for (const auto& entry : entries) {
    layout.offsets.push_back(layout.total);
    layout.total += (entry.input->num_elements() + align - 1) / align * align;
  }
  return layout;
}

void copy_into_fusion(const std::vector<TensorTableEntry>& entries, const FusionLayout& layout,
                      void* buffer, DataType dtype, cudaStream_t stream) {
  const std::int64_t esize = dtype_size(dtype);
  auto* base = static_cast<unsigned char*>(buffer);
  std::vector<DeviceCopy> copies;
  copies.reserve(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    unsigned char* dst = base + layout.offsets[i] * esize;
    const std::int64_t bytes = entries[i].input->num_elements() * esize;
    if (is_host_stand_in(entries[i])) {
      check_cuda(cudaMemsetAsync(dst, 0, bytes, stream), "zeroing a joined rank's contribution");
    } else {
      copies.push_back({entries[i].input->data(), dst, bytes});
    }
  }
  check_cuda(batched_device_copy(copies, stream), "copying into the device fusion buffer");
}

void copy_out_of_fusion(const std::vector<TensorTableEntry>& entries, const FusionLayout& layout,
                        const void* buffer, DataType dtype, cudaStream_t stream) {
  const std::int64_t esize = dtype_size(dtype);
  const auto* base = static_cast<const unsigned char*>(buffer);
  std::vector<DeviceCopy> copies;
  copies.reserve(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& out = entries[i].output;
    if (!out || out->device() == kCpuDevice) continue;  // a stand-in's result is discarded
    copies.push_back({base + layout.offsets[i] * esize, out->data(), out->num_elements() * esize});
  }
  check_cuda(batched_device_copy(copies, stream), "copying out of the device fusion buffer");
}

namespace {

// One tensor reduces straight from its input into its output; several (or a joined rank's
// stand-in) go through the device fusion buffer with one batched copy in and one out.
class NcclAllreduce final : public NcclOp {
 public:
  explicit NcclAllreduce(NcclContext& nccl) : NcclOp(nccl, "allreduce") {}

 protected:
  Status run(std::vector<TensorTableEntry>& entries, const Response& response,
             const Communicator& group) override {
    ncclComm_t comm = prepare(entries, response, group);
    const ReducePlan plan = reduce_plan(response, group.size());
    if (entries.size() == 1 && !is_host_stand_in(entries[0])) {
      reduce_single(entries[0], response.dtype, plan, comm);
    } else {
      reduce_fused(entries, response.dtype, plan, comm);
    }
    return nccl_.finish_async(entries, name_);
  }

 private:
  void reduce_single(TensorTableEntry& entry, DataType dtype, const ReducePlan& plan, ncclComm_t comm) {
    cudaStream_t stream = nccl_.stream();
    const std::int64_t count = entry.input->num_elements();
    void* out = entry.output ? entry.output->data() : entry.input->data();
    const void* send = entry.input->data();
    if (plan.prescale != 1.0) {  // the input stays untouched: scale into the output
      check_cuda(scale_device_copy(send, out, count, dtype, plan.prescale, stream), "prescale");
      send = out;
    }
    nccl_.op_context().timeline.activity_start(entry.name, "NCCL_ALLREDUCE");
    check_nccl(ncclAllReduce(send, out, count, nccl_datatype(dtype), plan.op, comm, stream),
               "ncclAllReduce", comm);
    if (plan.postscale != 1.0) {
      check_cuda(scale_device_buffer(out, count, dtype, plan.postscale, stream), "postscale");
    }
  }

  void reduce_fused(std::vector<TensorTableEntry>& entries, DataType dtype, const ReducePlan& plan,
                    ncclComm_t comm) {
    cudaStream_t stream = nccl_.stream();
    auto& timeline = nccl_.op_context().timeline;
    const FusionLayout layout = fusion_layout(entries, dtype);
    void* buffer = nccl_.fusion_buffer(layout.total * dtype_size(dtype));
    for (const auto& e : entries) timeline.activity_start(e.name, "MEMCPY_IN_FUSION_BUFFER");
    copy_into_fusion(entries, layout, buffer, dtype, stream);
    for (const auto& e : entries) timeline.activity_end(e.name);
    if (plan.prescale != 1.0) {
      check_cuda(scale_device_buffer(buffer, layout.total, dtype, plan.prescale, stream), "prescale");
    }
    nccl_.start_activity(entries, "NCCL_ALLREDUCE");
    check_nccl(ncclAllReduce(buffer, buffer, layout.total, nccl_datatype(dtype), plan.op, comm, stream),
               "ncclAllReduce", comm);
    if (plan.postscale != 1.0) {
      check_cuda(scale_device_buffer(buffer, layout.total, dtype, plan.postscale, stream), "postscale");
    }
    switch_activity_on_stream(timeline, entries, "MEMCPY_OUT_FUSION_BUFFER", stream);
    copy_out_of_fusion(entries, layout, buffer, dtype, stream);
  }
};

}  // namespace

std::unique_ptr<CollectiveOp> make_nccl_allreduce(NcclContext& nccl) {
  return std::make_unique<NcclAllreduce>(nccl);
}

}  // namespace hvd::detail
