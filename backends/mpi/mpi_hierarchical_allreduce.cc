#include "backends/mpi/mpi_hierarchical_allreduce.h"

#include <climits>
#include <cstring>
#include <vector>

#include "backends/mpi/mpi_activity.h"
#include "backends/mpi/mpi_world.h"
#include "core/copy_bytes.h"
#include "core/host_scale.h"
#include "core/integer_average.h"

namespace hvd::detail {
namespace {

// The fused tensors are packed into the host fusion buffer. Rank l of a node owns elements
// [offset_l, offset_l + n_l) where the first (total % local_size) local ranks own one extra
// element, so every count works. The reduce-scatter lands that slice in a scratch buffer, the
// cross-node allreduce runs on the slice, and the allgather writes it back into the fusion buffer.
class MpiHierarchicalAllreduce final : public CollectiveOp {
 public:
  MpiHierarchicalAllreduce(MpiWorld& world, OpContext& context) : world_(world), context_(context) {}
  const char* backend() const override { return "MPI"; }

  bool enabled(const Response& response, const std::vector<TensorTableEntry>& entries,
               const Communicator& group) const override {
    // Host memory only (device tensors are staged by the NCCL backend: see mpi_ops.cc).
    const bool host = entries.empty() || entries.front().device == kCpuDevice;
    // Node-local and cross-node groups exist for the world only: process sets reduce flat.
    const bool world_group = group.id() == 0;
    return host && world_group && response.reduce_op != ReduceOp::Adasum && context_.settings.hierarchical_allreduce &&
           world_.local_size() > 1 && world_.cross_size() > 1 && world_.homogeneous();
  }

  Status execute(std::vector<TensorTableEntry>& entries, const Response& response, const Communicator&) override {
    const DataType dtype = response.dtype;
    const std::int64_t esize = dtype_size(dtype);
    std::int64_t total = 0;
    for (const auto& e : entries) total += e.input->num_elements();
    auto* buffer = static_cast<unsigned char*>(
        context_.host_fusion_buffer.get(static_cast<std::size_t>(total * esize)));
    pack(entries, buffer);
    scale_host_buffer(buffer, total, dtype, response.prescale_factor);

    // Average reduces as Sum throughout; 1/size is applied once at the end. Integers sum as
    // int64 words and divide exactly: see Note [Integer averages are exact].
    const bool integer_average = response.reduce_op == ReduceOp::Average && is_integer(dtype);
    const ReduceOp op = response.reduce_op == ReduceOp::Average ? ReduceOp::Sum : response.reduce_op;
    Status status = Status::ok();
    if (integer_average) {
      const std::int64_t words = total * average_words(dtype);
      if (static_cast<std::int64_t>(wide_.size()) < words) wide_.resize(static_cast<std::size_t>(words));
      widen_for_average(buffer, total, dtype, wide_.data());
      status = reduce(reinterpret_cast<unsigned char*>(wide_.data()), words, DataType::Int64, op, entries);
      if (status.is_ok()) finish_average(wide_.data(), total, dtype, world_.size(), buffer);
    } else {
      status = reduce(buffer, total, dtype, op, entries);
    }
    if (!status.is_ok()) return status;

    const double average = response.reduce_op == ReduceOp::Average && !integer_average ? 1.0 / world_.size() : 1.0;
    scale_host_buffer(buffer, total, dtype, response.postscale_factor * average);
    unpack(entries, buffer);
    return Status::ok();
  }

 private:
  void pack(const std::vector<TensorTableEntry>& entries, unsigned char* buffer) {
    Activity a(context_.timeline, entries, "MEMCPY_IN_FUSION_BUFFER");
    for (const auto& e : entries) {
      copy_bytes(buffer, e.input->data(), e.input->size_bytes());
      buffer += e.input->size_bytes();
    }
  }

  void unpack(const std::vector<TensorTableEntry>& entries, const unsigned char* buffer) {
    Activity a(context_.timeline, entries, "MEMCPY_OUT_FUSION_BUFFER");
    for (const auto& e : entries) {
      if (e.output->data() != buffer) std::memmove(e.output->data(), buffer, e.output->size_bytes());
      buffer += e.output->size_bytes();
    }
  }

  Status reduce(unsigned char* buffer, std::int64_t total, DataType dtype, ReduceOp op,
                const std::vector<TensorTableEntry>& entries) {
    const int local_size = world_.local_size();
    const int local_rank = world_.local_rank();
    if (total / local_size + 1 > INT_MAX) {
      return Status::error("hierarchical allreduce of " + std::to_string(total) +
                           " elements exceeds MPI's int counts per rank");
    }
    std::vector<int> counts(local_size), displs(local_size);
    for (int l = 0, offset = 0; l < local_size; ++l) {
      counts[l] = static_cast<int>(total / local_size + (l < total % local_size ? 1 : 0));
      displs[l] = offset;
      offset += counts[l];
    }
    const std::int64_t esize = dtype_size(dtype);
    scratch_.resize(static_cast<std::size_t>(std::max(counts[0], 1) * esize));
    const MPI_Datatype type = world_.types().datatype(dtype);
    const MPI_Op mpi_op = world_.types().reduce_op(dtype, op);

    Activity a(context_.timeline, entries, "MPI_HIERARCHICAL_ALLREDUCE");
    Status status = check(MPI_Reduce_scatter(buffer, scratch_.data(), counts.data(), type, mpi_op,
                                             world_.local_comm()),
                          "MPI_Reduce_scatter (node)");
    if (status.is_ok()) {
      status = world_.host_allreduce(scratch_.data(), counts[local_rank], dtype, op, CommScope::Cross);
    }
    if (status.is_ok()) {
      status = check(MPI_Allgatherv(scratch_.data(), counts[local_rank], type, buffer, counts.data(),
                                    displs.data(), type, world_.local_comm()),
                     "MPI_Allgatherv (node)");
    }
    return status;
  }

  static Status check(int code, const char* call) {
    return code == MPI_SUCCESS ? Status::ok() : Status::error(mpi_error_message(call, code));
  }

  MpiWorld& world_;
  OpContext& context_;
  std::vector<unsigned char> scratch_;  // this rank's slice; grown on demand, never shrunk
  std::vector<std::int64_t> wide_;      // integer Average's words; grown on demand, never shrunk
};

}  // namespace

std::unique_ptr<CollectiveOp> make_mpi_hierarchical_allreduce(MpiWorld& world, OpContext& context) {
  return std::make_unique<MpiHierarchicalAllreduce>(world, context);
}

}  // namespace hvd::detail
