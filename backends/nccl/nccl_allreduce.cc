// Allreduce on NCCL, and the fusion-buffer helpers it shares with hierarchical allreduce.
#include "backends/nccl/nccl_errors.h"
#include "backends/nccl/nccl_kernels.h"
#include "backends/nccl/nccl_ops.h"
#include "core/integer_average.h"
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
                      void* buffer, DataType dtype, cudaStream_t stream, Launch& launch) {
  const std::int64_t esize = dtype_size(dtype);
  auto* base = static_cast<unsigned char*>(buffer);
  std::vector<DeviceCopy> copies;
  copies.reserve(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    unsigned char* dst = base + layout.offsets[i] * esize;
    const std::int64_t bytes = entries[i].input->num_elements() * esize;
    if (is_host_stand_in(entries[i])) {
      launch.local("zeroing a joined rank's contribution", [&] { return cudaMemsetAsync(dst, 0, bytes, stream); });
    } else {
      copies.push_back({entries[i].input->data(), dst, bytes});
    }
  }
  launch.local("copying into the device fusion buffer", [&] { return batched_device_copy(copies, stream); });
}

void copy_out_of_fusion(const std::vector<TensorTableEntry>& entries, const FusionLayout& layout,
                        const void* buffer, DataType dtype, cudaStream_t stream, Launch& launch) {
  const std::int64_t esize = dtype_size(dtype);
  const auto* base = static_cast<const unsigned char*>(buffer);
  std::vector<DeviceCopy> copies;
  copies.reserve(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& out = entries[i].output;
    if (!out || out->device() == kCpuDevice) continue;  // a stand-in's result is discarded
    copies.push_back({base + layout.offsets[i] * esize, out->data(), out->num_elements() * esize});
  }
  launch.local("copying out of the device fusion buffer", [&] { return batched_device_copy(copies, stream); });
}

namespace {

// One tensor reduces straight from its input into its output; several go through the device
// fusion buffer with one batched copy in and one out. A joined rank contributes zeros.
class NcclAllreduce final : public NcclOp {
 public:
  explicit NcclAllreduce(NcclContext& nccl) : NcclOp(nccl, "allreduce") {}

 protected:
  Status run(std::vector<TensorTableEntry>& entries, const Response& response,
             const Communicator& group) override {
    ncclComm_t comm = prepare(entries, response, group);
    const ReducePlan plan = reduce_plan(response);
    const ncclDataType_t type = plan.wire_type(response.dtype);
    Launch launch(nccl_);
    // The element count must not depend on whether this rank has joined: every rank makes the
    // same decision from the response alone.
    const int size = group.size();
    if (entries.size() == 1 && is_host_stand_in(entries[0])) {
      const std::int64_t count = entries[0].input->num_elements();
      void* buffer = nccl_.fusion_buffer(plan.through_words ? average_word_bytes(count, response.dtype)
                                                              : entries[0].input->size_bytes());
      contribute_zeros(entries[0], response.dtype, type, plan, comm, buffer, launch);
    } else if (entries.size() == 1) {
      const std::int64_t count = entries[0].input->num_elements();
      // The int64 words (ReducePlan::through_words) live in the fusion buffer.
      auto* wide = plan.through_words
                       ? static_cast<std::int64_t*>(nccl_.fusion_buffer(average_word_bytes(count, response.dtype)))
                       : nullptr;
      reduce_single(entries[0], response.dtype, type, plan, comm, size, wide, launch);
    } else {
      const FusionLayout layout = fusion_layout(entries, response.dtype);
      // The data, then (through_words) its words: the data's end is 64-byte aligned.
      const std::int64_t data_bytes = layout.total * dtype_size(response.dtype);
      const std::int64_t word_bytes = plan.through_words ? average_word_bytes(layout.total, response.dtype) : 0;
      auto* buffer = static_cast<unsigned char*>(nccl_.fusion_buffer(data_bytes + word_bytes));
      auto* wide = plan.through_words ? reinterpret_cast<std::int64_t*>(buffer + data_bytes) : nullptr;
      reduce_fused(entries, response.dtype, type, plan, comm, size, layout, buffer, wide, launch);
    }
    return nccl_.finish_async(entries, name_, launch);
  }

 private:
  // A joined rank's part of a one-tensor allreduce: zeros, the same count and type as its peers'
  // (through_words: zero words; `type` is then ncclInt64).
  void contribute_zeros(TensorTableEntry& entry, DataType dtype, ncclDataType_t type, const ReducePlan& plan,
                        ncclComm_t comm, void* buffer, Launch& launch) {
    cudaStream_t stream = nccl_.stream();
    std::int64_t count = entry.input->num_elements();
    std::int64_t bytes = count * dtype_size(dtype);
    if (plan.through_words) {
      bytes = average_word_bytes(count, dtype);
      count *= average_words(dtype);
    }
    nccl_.op_context().timeline.activity_start(entry.name, "NCCL_ALLREDUCE");
    launch.local("zeroing a joined rank's contribution", [&] { return cudaMemsetAsync(buffer, 0, bytes, stream); });
    launch.collective("ncclAllReduce", comm, [&] { return ncclAllReduce(buffer, buffer, count, type, plan.op, comm, stream); });
    launch.collectives_done();
  }

  // `count` elements of `send` into `out` (which may be `send`) through int64 words
  // (ReducePlan::through_words): widened into `wide`, the words reduced across the group, each
  // result divided by plan.divisor(size) into `out`.
  void reduce_words(const void* send, void* out, std::int64_t count, DataType dtype, const ReducePlan& plan,
                    ncclComm_t comm, int size, std::int64_t* wide, Launch& launch) {
    cudaStream_t stream = nccl_.stream();
    const std::int64_t words = count * average_words(dtype);
    launch.local("widening integers into int64 words", [&] { return widen_device_for_average(send, count, dtype, wide, stream); });
    launch.collective("ncclAllReduce", comm, [&] { return ncclAllReduce(wide, wide, words, ncclInt64, plan.op, comm, stream); });
    launch.collectives_done();
    launch.local("narrowing the int64 words", [&] {
      return finish_device_average(wide, count, dtype, plan.divisor(size), out, stream);
    });
  }

  void reduce_single(TensorTableEntry& entry, DataType dtype, ncclDataType_t type, const ReducePlan& plan,
                     ncclComm_t comm, int size, std::int64_t* wide, Launch& launch) {
    cudaStream_t stream = nccl_.stream();
    const std::int64_t count = entry.input->num_elements();
    void* out = entry.output ? entry.output->data() : entry.input->data();
    const void* send = entry.input->data();
    if (plan.prescale != 1.0) {  // the input stays untouched: scale into the output
      launch.local("prescale", [&] { return scale_device_copy(send, out, count, dtype, plan.prescale, stream); });
      send = out;
    }
    nccl_.op_context().timeline.activity_start(entry.name, "NCCL_ALLREDUCE");
    if (plan.through_words) {
      reduce_words(send, out, count, dtype, plan, comm, size, wide, launch);
    } else {
      launch.collective("ncclAllReduce", comm, [&] { return ncclAllReduce(send, out, count, type, plan.op, comm, stream); });
      launch.collectives_done();
    }
    if (plan.postscale != 1.0) {
      launch.local("postscale", [&] { return scale_device_buffer(out, count, dtype, plan.postscale, stream); });
    }
  }

  void reduce_fused(std::vector<TensorTableEntry>& entries, DataType dtype, ncclDataType_t type, const ReducePlan& plan,
                    ncclComm_t comm, int size, const FusionLayout& layout, void* buffer, std::int64_t* wide,
                    Launch& launch) {
    cudaStream_t stream = nccl_.stream();
    auto& timeline = nccl_.op_context().timeline;
    for (const auto& e : entries) timeline.activity_start(e.name, "MEMCPY_IN_FUSION_BUFFER");
    copy_into_fusion(entries, layout, buffer, dtype, stream, launch);
    for (const auto& e : entries) timeline.activity_end(e.name);
    if (plan.prescale != 1.0) {
      launch.local("prescale", [&] { return scale_device_buffer(buffer, layout.total, dtype, plan.prescale, stream); });
    }
    nccl_.start_activity(entries, "NCCL_ALLREDUCE");
    if (plan.through_words) {
      reduce_words(buffer, buffer, layout.total, dtype, plan, comm, size, wide, launch);
    } else {
      launch.collective("ncclAllReduce", comm,
                        [&] { return ncclAllReduce(buffer, buffer, layout.total, type, plan.op, comm, stream); });
      launch.collectives_done();
    }
    if (plan.postscale != 1.0) {
      launch.local("postscale", [&] { return scale_device_buffer(buffer, layout.total, dtype, plan.postscale, stream); });
    }
    switch_activity_on_stream(timeline, entries, "MEMCPY_OUT_FUSION_BUFFER", stream);
    copy_out_of_fusion(entries, layout, buffer, dtype, stream, launch);
  }
};

}  // namespace

std::unique_ptr<CollectiveOp> make_nccl_allreduce(NcclContext& nccl) {
  return std::make_unique<NcclAllreduce>(nccl);
}

}  // namespace hvd::detail
