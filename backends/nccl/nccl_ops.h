// The NCCL collective ops. Each enqueues its work on the context's stream after waiting (on the
// GPU) for the inputs' ready events, then hands completion to the finalizer and returns
// InProgress. Created by NcclBackend::register_ops, run on the background thread.
#pragma once

#include <nccl.h>

#include <memory>
#include <string>

#include "backends/nccl/nccl_context.h"
#include "core/collective_op.h"

namespace hvd::detail {
class OpRegistry;
}

namespace hvd::detail {

// Common part of every NCCL op: the backend name, device-tensor eligibility, the lock on the
// communicators, and turning a failure of the plan into Status::error naming the op and tensors
// (see Note [Errors after NCCL work was enqueued]).
class NcclOp : public CollectiveOp {
 public:
  NcclOp(NcclContext& nccl, const char* name) : nccl_(nccl), name_(name) {}
  const char* backend() const override { return "NCCL"; }
  bool enabled(const Response& response, const std::vector<TensorTableEntry>& entries,
               const Communicator& group) const override;
  Status execute(std::vector<TensorTableEntry>& entries, const Response& response,
                 const Communicator& group) final;

 protected:
  // Plans the work (may throw: nothing is enqueued yet), then enqueues it through a Launch,
  // which never throws, and returns nccl_.finish_async(...).
  virtual Status run(std::vector<TensorTableEntry>& entries, const Response& response,
                     const Communicator& group) = 0;
  // Prepares the context on this rank's device for the response; returns `group`'s communicator.
  ncclComm_t prepare(const std::vector<TensorTableEntry>& entries, const Response& response,
                     const Communicator& group);

  NcclContext& nccl_;
  const char* name_;
};

// Note [int16 reduces through int64 words on NCCL]
// NCCL has no 16-bit integer type. Every int16 allreduce and reducescatter (hierarchical too)
// goes through the int64 words of an integer Average (one word per element, widened after any
// prescale): the words are reduced with the op itself, and each result goes back into int16 as
// integer::finish does with divisor 1, keeping the low 16 bits. So Sum and Product wrap modulo
// 2^16 as on the host path (a sum of int16 values cannot overflow int64; a product's low 16 bits
// survive the int64 product's wrapping), Min and Max are exact, and Average is the integer
// Average of every other dtype. Broadcast and allgather only move elements: int16 travels as a
// 2-byte NCCL type (nccl_copy_datatype); alltoall moves bytes.

// Mappings and the scaling plan shared by allreduce and reducescatter.
ncclDataType_t nccl_datatype(DataType dtype);       // for reductions; never int16 (the Note above)
ncclDataType_t nccl_copy_datatype(DataType dtype);  // for collectives that only move elements
bool is_floating(DataType dtype);
struct ReducePlan {
  ncclRedOp_t op = ncclSum;
  double prescale = 1.0;
  double postscale = 1.0;
  // The data is widened to int64 words (average_words per element), the words are reduced with
  // `op` as ncclInt64, and each result divided by divisor() into the dtype, as the host path
  // does: an integer Average (Note [Integer averages are exact]) and every int16 reduction (Note
  // [int16 reduces through int64 words on NCCL]).
  bool through_words = false;
  // Average on an integer dtype: op is ncclSum and the sums are divided by the group size.
  bool integer_average = false;
  int divisor(int group_size) const { return integer_average ? group_size : 1; }
  // The NCCL type the collective runs in: int64 words, else the dtype's own.
  ncclDataType_t wire_type(DataType dtype) const { return through_words ? ncclInt64 : nccl_datatype(dtype); }
};
ReducePlan reduce_plan(const Response& response);
// Bytes of the int64 words of an integer Average of `count` elements.
std::int64_t average_word_bytes(std::int64_t count, DataType dtype);
// entry.output from the entry's allocator, checked to be on `device`. Throws NcclFailure.
void allocate_device_output(TensorTableEntry& entry, DataType dtype, const TensorShape& shape, int device);
std::int64_t row_elements(const TensorShape& shape);

std::unique_ptr<CollectiveOp> make_nccl_allreduce(NcclContext& nccl);
std::unique_ptr<CollectiveOp> make_nccl_hierarchical_allreduce(NcclContext& nccl);
std::unique_ptr<CollectiveOp> make_nccl_allgather(NcclContext& nccl);
std::unique_ptr<CollectiveOp> make_nccl_broadcast(NcclContext& nccl);
std::unique_ptr<CollectiveOp> make_nccl_alltoall(NcclContext& nccl);
std::unique_ptr<CollectiveOp> make_nccl_reducescatter(NcclContext& nccl);
// Device tensors staged through host memory for the MPI op `registry` has for host tensors
// (nccl_staged_mpi_ops.cc), in one of two roles:
enum class StagedRole {
  GpuOperationsMpi,  // HOROVOD_GPU_OPERATIONS=mpi: any collective (backend "MPI")
  AdasumOnNccl,      // the Adasum allreduces NcclAdasum declines (backend "NCCL": NCCL has no Adasum)
};
std::unique_ptr<CollectiveOp> make_staged_mpi_op(const OpRegistry& registry, OpContext& context, StagedRole role);
// Runs host `entries` through the MPI op `registry` picks for them on `group` (nccl_staged_mpi_ops.cc).
Status run_mpi_op_on_host(const OpRegistry& registry, std::vector<TensorTableEntry>& entries,
                          const Response& response, const Communicator& group);
// Adasum of device tensors: the node's average on NCCL, then Adasum across the nodes on the host,
// in chunks where it can (nccl_adasum.cc). adasum_averages_within_node says when it, not the
// staged op, runs Adasum; see Note [Adasum of device tensors averages within the node].
std::unique_ptr<CollectiveOp> make_nccl_adasum(NcclContext& nccl, const OpRegistry& registry);
bool adasum_averages_within_node(const Response& response, const Communicator& group, const OpContext& context);

}  // namespace hvd::detail

namespace hvd::detail {

// Where each entry of a fused response sits in the device fusion buffer. Offsets are rounded up
// to 64 bytes (a whole number of elements of any dtype) so the batched copies move 16-byte words;
// the gaps are reduced along with the data and never copied out.
struct FusionLayout {
  std::vector<std::int64_t> offsets;  // in elements
  std::int64_t total = 0;             // elements, gaps included
};
FusionLayout fusion_layout(const std::vector<TensorTableEntry>& entries, DataType dtype);
// Batched copies of every input into `buffer` (zeros for a joined rank's host stand-ins).
void copy_into_fusion(const std::vector<TensorTableEntry>& entries, const FusionLayout& layout,
                      void* buffer, DataType dtype, cudaStream_t stream, Launch& launch);
// Batched copies of `buffer` back to every device output.
void copy_out_of_fusion(const std::vector<TensorTableEntry>& entries, const FusionLayout& layout,
                        const void* buffer, DataType dtype, cudaStream_t stream, Launch& launch);
// True when an entry is a joined rank's zero-filled host stand-in.
bool is_host_stand_in(const TensorTableEntry& entry);

}  // namespace hvd::detail
