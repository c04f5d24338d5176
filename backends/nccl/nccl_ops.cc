// NcclOp's common part, the dtype/op mappings, broadcast and allgather.
#include "backends/nccl/nccl_ops.h"

#include "backends/nccl/nccl_errors.h"
#include "backends/nccl/nccl_kernels.h"
#include "core/integer_average.h"

namespace hvd::detail {

ncclDataType_t nccl_datatype(DataType dtype) {
  switch (dtype) {
    case DataType::UInt8: return ncclUint8;
    case DataType::Int8: return ncclInt8;
    case DataType::Int32: return ncclInt32;
    case DataType::Int64: return ncclInt64;
    case DataType::Float16: return ncclFloat16;
    case DataType::BFloat16: return ncclBfloat16;
    case DataType::Float32: return ncclFloat32;
    case DataType::Float64: return ncclFloat64;
    case DataType::Int16:  // a plan that forgot Note [int16 reduces through int64 words on NCCL]
      throw NcclFailure("NCCL has no 16-bit integer type: int16 reduces through int64 words");
  }
  throw NcclFailure(std::string("no NCCL type for dtype ") + dtype_name(dtype));
}

// Broadcast and allgather only move the elements: int16 travels as a 2-byte type of NCCL's.
ncclDataType_t nccl_copy_datatype(DataType dtype) {
  return dtype == DataType::Int16 ? ncclFloat16 : nccl_datatype(dtype);
}

bool is_floating(DataType dtype) {
  return dtype == DataType::Float16 || dtype == DataType::BFloat16 || dtype == DataType::Float32 ||
         dtype == DataType::Float64;
}

// For floating types ncclAvg does the division inside the collective; integers are averaged
// exactly, through int64 words (ReducePlan::integer_average), and int16 reduces through them
// whatever the op (Note [int16 reduces through int64 words on NCCL]).
ReducePlan reduce_plan(const Response& response) {
  ReducePlan plan;
  plan.prescale = response.prescale_factor;
  plan.postscale = response.postscale_factor;
  switch (response.reduce_op) {
    case ReduceOp::Average:
      if (is_floating(response.dtype)) {
        plan.op = ncclAvg;
      } else {
        plan.op = ncclSum;
        plan.integer_average = true;
        plan.through_words = true;
      }
      break;
    case ReduceOp::Sum: plan.op = ncclSum; break;
    case ReduceOp::Min: plan.op = ncclMin; break;
    case ReduceOp::Max: plan.op = ncclMax; break;
    case ReduceOp::Product: plan.op = ncclProd; break;
    case ReduceOp::Adasum: break;  // NcclOp::enabled declines it; NcclAdasum plans its own
  }
  if (response.dtype == DataType::Int16) plan.through_words = true;
  return plan;
}

std::int64_t average_word_bytes(std::int64_t count, DataType dtype) {
  return count * average_words(dtype) * static_cast<std::int64_t>(sizeof(std::int64_t));
}

bool is_host_stand_in(const TensorTableEntry& entry) {
  return entry.input && entry.input->device() == kCpuDevice;
}

// Same rule as the registry's: the first entry's device decides (a joined rank's stand-ins
// carry the response's device).
bool NcclOp::enabled(const Response& response, const std::vector<TensorTableEntry>& entries,
                     const Communicator&) const {
  const int device = entries.empty() ? response.device : entries.front().device;
  // Adasum has its own ops: nccl_adasum.cc, and the staged one for the rest.
  return device != kCpuDevice && response.reduce_op != ReduceOp::Adasum;
}

ncclComm_t NcclOp::prepare(const std::vector<TensorTableEntry>& entries, const Response& response,
                           const Communicator& group) {
  // This rank's own device: a real entry's, else (a joined rank's stand-ins only) the device
  // the communicator already lives on, else the response's.
  int device = nccl_.device() >= 0 ? nccl_.device() : response.device;
  for (const auto& entry : entries) {
    if (entry.input && entry.input->device() != kCpuDevice) {
      device = entry.input->device();
      break;
    }
  }
  ncclComm_t comm = nccl_.prepare(device, group);
  nccl_.wait_for_inputs(entries);
  return comm;
}

Status NcclOp::execute(std::vector<TensorTableEntry>& entries, const Response& response,
                       const Communicator& group) {
  auto lock = nccl_.use();
  // After an abort the op still runs, enqueueing nothing, and fails (Note [An aborted rank still
  // takes part in the host steps]).
  try {
    return run(entries, response, group);
  } catch (const NcclGroupFailure& e) {  // the plan only, and every rank of the group alike
    return Status::error(std::string("NCCL ") + name_ + " of [" + entry_names(entries) + "] failed: " + e.what());
  }
  // Any other exception of the plan may be this rank's alone: it stops the job (nccl_errors.h).
}

std::int64_t row_elements(const TensorShape& shape) {
  std::int64_t row = 1;
  for (std::size_t d = 1; d < shape.size(); ++d) row *= shape[d];
  return row;
}

void allocate_device_output(TensorTableEntry& entry, DataType dtype, const TensorShape& shape, int device) {
  if (!entry.allocate_output) throw NcclFailure("no device output allocator for " + entry.name);
  entry.output = entry.allocate_output(dtype, shape);
  if (!entry.output || entry.output->device() != device) {
    throw NcclFailure("the output allocator of " + entry.name + " did not return a tensor on device " +
                      std::to_string(device));
  }
}

namespace {

// Broadcast: every entry from the response's root, grouped into one NCCL launch.
class NcclBroadcast final : public NcclOp {
 public:
  explicit NcclBroadcast(NcclContext& nccl) : NcclOp(nccl, "broadcast") {}

 protected:
  Status run(std::vector<TensorTableEntry>& entries, const Response& response,
             const Communicator& group) override {
    ncclComm_t comm = prepare(entries, response, group);
    const ncclDataType_t type = nccl_copy_datatype(response.dtype);
    nccl_.start_activity(entries, "NCCL_BCAST");
    Launch launch(nccl_);
    launch.group(comm, [&] {
      for (auto& entry : entries) {
        void* out = entry.output ? entry.output->data() : entry.input->data();
        launch.collective("ncclBroadcast", comm, [&] {
          return ncclBroadcast(entry.input->data(), out, entry.input->num_elements(), type, response.root, comm,
                               nccl_.stream());
        });
      }
    });
    launch.collectives_done();
    return nccl_.finish_async(entries, name_, launch);
  }
};

// Allgather along the first dimension. Equal first dimensions use ncclAllGather; different
// ones become one grouped ncclBroadcast per rank into that rank's rows of the output.
class NcclAllgather final : public NcclOp {
 public:
  explicit NcclAllgather(NcclContext& nccl) : NcclOp(nccl, "allgather") {}

 protected:
  Status run(std::vector<TensorTableEntry>& entries, const Response& response,
             const Communicator& group) override {
    ncclComm_t comm = prepare(entries, response, group);
    const int size = group.size();
    const bool per_tensor = response.first_dims.size() == entries.size() * size;
    if (!per_tensor && response.first_dims.size() != static_cast<std::size_t>(size)) {
      throw NcclFailure("the response carries " + std::to_string(response.first_dims.size()) +
                        " first dimensions for " + std::to_string(size) + " ranks");
    }
    const ncclDataType_t type = nccl_copy_datatype(response.dtype);
    // Every output before anything is enqueued.
    std::vector<std::vector<std::int64_t>> dims(entries.size());
    for (std::size_t t = 0; t < entries.size(); ++t) {
      const std::int64_t* first = response.first_dims.data() + (per_tensor ? t * size : 0);
      dims[t].assign(first, first + size);
      const TensorShape& in_shape = entries[t].input->shape();
      if (in_shape.empty()) throw NcclFailure("allgather needs a tensor of at least one dimension");
      TensorShape out_shape = in_shape;
      out_shape[0] = 0;
      for (auto d : dims[t]) out_shape[0] += d;
      allocate_device_output(entries[t], response.dtype, out_shape, nccl_.device());
    }
    nccl_.wait_for_outputs(entries);
    nccl_.start_activity(entries, "NCCL_ALLGATHER");
    Launch launch(nccl_);
    for (std::size_t t = 0; t < entries.size(); ++t) gather_one(entries[t], dims[t], response.dtype, type, comm, launch);
    launch.collectives_done();
    return nccl_.finish_async(entries, name_, launch);
  }

 private:
  void gather_one(TensorTableEntry& entry, const std::vector<std::int64_t>& dims, DataType dtype,
                  ncclDataType_t type, ncclComm_t comm, Launch& launch) {
    const std::int64_t row = row_elements(entry.input->shape());
    bool equal = true;
    for (auto d : dims) equal = equal && d == dims[0];
    auto* out = static_cast<unsigned char*>(entry.output->data());
    if (equal) {
      launch.collective("ncclAllGather", comm, [&] {
        return ncclAllGather(entry.input->data(), out, dims[0] * row, type, comm, nccl_.stream());
      });
      return;
    }
    launch.group(comm, [&] {
      std::int64_t offset = 0;
      for (std::size_t r = 0; r < dims.size(); ++r) {
        if (dims[r] > 0) {
          launch.collective("ncclBroadcast (allgather)", comm, [&] {
            return ncclBroadcast(entry.input->data(), out + offset * row * dtype_size(dtype), dims[r] * row, type,
                                 static_cast<int>(r), comm, nccl_.stream());
          });
        }
        offset += dims[r];
      }
    });
  }
};

}  // namespace

std::unique_ptr<CollectiveOp> make_nccl_broadcast(NcclContext& nccl) {
  return std::make_unique<NcclBroadcast>(nccl);
}
std::unique_ptr<CollectiveOp> make_nccl_allgather(NcclContext& nccl) {
  return std::make_unique<NcclAllgather>(nccl);
}

}  // namespace hvd::detail
