// Alltoall and reducescatter on NCCL: the ops whose output shape depends on the other ranks.
#include <cstring>

#include "backends/nccl/nccl_errors.h"
#include "backends/nccl/nccl_kernels.h"
#include "backends/nccl/nccl_ops.h"

namespace hvd::detail {
namespace {

// Every rank's send counts reach every rank through the group's control channel (gathered to
// its rank 0, which sends the whole matrix back); returns how many rows each rank sends here.
std::vector<std::int64_t> exchange_splits(const Communicator& group, const std::vector<std::int64_t>& sends) {
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(sends.data());
  std::vector<std::vector<std::uint8_t>> gathered;
  std::vector<std::uint8_t> matrix;
  try {
    gathered = group.control().gather(std::vector<std::uint8_t>(bytes, bytes + sends.size() * sizeof(std::int64_t)));
    for (const auto& row : gathered) matrix.insert(matrix.end(), row.begin(), row.end());
    matrix = group.control().broadcast(matrix);
  } catch (const std::exception& e) {
    throw NcclFailure(std::string("exchanging alltoall splits through the control channel failed: ") + e.what());
  }
  const std::size_t size = static_cast<std::size_t>(group.size());
  if (matrix.size() != size * size * sizeof(std::int64_t))
    throw NcclFailure("the alltoall splits exchanged have " + std::to_string(matrix.size()) + " bytes for " +
                      std::to_string(size) + " ranks");
  std::vector<std::int64_t> recvs(size);
  for (std::size_t from = 0; from < size; ++from)
    std::memcpy(&recvs[from], matrix.data() + (from * size + group.rank()) * sizeof(std::int64_t), sizeof(std::int64_t));
  return recvs;
}

std::int64_t row_elements(const TensorShape& shape) {
  std::int64_t row = 1;
  for (std::size_t d = 1; d < shape.size(); ++d) row *= shape[d];
  return row;
}

TensorPtr allocate_device_output(TensorTableEntry& entry, DataType dtype, const TensorShape& shape,
                                 int device) {
  if (!entry.allocate_output) throw NcclFailure("no device output allocator for " + entry.name);
  TensorPtr out = entry.allocate_output(dtype, shape);
  if (!out || out->device() != device) {
    throw NcclFailure("the output allocator of " + entry.name +
                      " did not return a tensor on device " + std::to_string(device));
  }
  return out;
}

// Alltoall: rows of the first dimension go to each rank by entry.splits (empty: even). The
// receive counts are exchanged through the group's control channel first (host integers on the background thread), then
// one grouped ncclSend/ncclRecv moves the data.
class NcclAlltoall final : public NcclOp {
 public:
  explicit NcclAlltoall(NcclContext& nccl) : NcclOp(nccl, "alltoall") {}

 protected:
  Status run(std::vector<TensorTableEntry>& entries, const Response& response,
             const Communicator& group) override {
    ncclComm_t comm = prepare(entries, response, group);
    for (auto& entry : entries) exchange_one(entry, response.dtype, group, comm);
    nccl_.start_activity(entries, "NCCL_ALLTOALL");
    return nccl_.finish_async(entries, name_);
  }

 private:
  std::vector<std::int64_t> send_splits(const TensorTableEntry& entry, std::int64_t rows, int size) {
    if (entry.splits.empty()) {
      if (rows % size != 0) {
        throw NcclFailure("alltoall of " + entry.name + ": first dimension " + std::to_string(rows) +
                          " is not divisible by " + std::to_string(size) + " ranks; pass splits");
      }
      return std::vector<std::int64_t>(size, rows / size);
    }
    std::int64_t total = 0;
    for (auto s : entry.splits) total += s < 0 ? rows + 1 : s;
    if (entry.splits.size() != static_cast<std::size_t>(size) || total != rows) {
      throw NcclFailure("alltoall of " + entry.name + ": splits must be " + std::to_string(size) +
                        " non-negative counts summing to the first dimension " + std::to_string(rows));
    }
    return entry.splits;
  }

  void exchange_one(TensorTableEntry& entry, DataType dtype, const Communicator& group, ncclComm_t comm) {
    const int size = group.size();
    const TensorShape& shape = entry.input->shape();
    if (shape.empty()) throw NcclFailure("alltoall needs a tensor of at least one dimension");
    const std::vector<std::int64_t> sends = send_splits(entry, shape[0], size);
    const std::vector<std::int64_t> recvs = exchange_splits(group, sends);
    TensorShape out_shape = shape;
    out_shape[0] = 0;
    for (auto r : recvs) out_shape[0] += r;
    entry.output = allocate_device_output(entry, dtype, out_shape, nccl_.device());
    entry.received_splits = recvs;

    const std::int64_t row_bytes = row_elements(shape) * dtype_size(dtype);
    const auto* in = static_cast<const unsigned char*>(entry.input->data());
    auto* out = static_cast<unsigned char*>(entry.output->data());
    // Bytes as ncclUint8 sidestep counts that overflow for wide rows of large dtypes.
    NcclGroup launch;
    std::int64_t send_off = 0, recv_off = 0;
    for (int peer = 0; peer < size; ++peer) {
      if (sends[peer] > 0) {
        check_nccl(ncclSend(in + send_off, sends[peer] * row_bytes, ncclUint8, peer, comm,
                            nccl_.stream()), "ncclSend", comm);
      }
      if (recvs[peer] > 0) {
        check_nccl(ncclRecv(out + recv_off, recvs[peer] * row_bytes, ncclUint8, peer, comm,
                            nccl_.stream()), "ncclRecv", comm);
      }
      send_off += sends[peer] * row_bytes;
      recv_off += recvs[peer] * row_bytes;
    }
    launch.end(comm);
  }
};

// Reducescatter along the first dimension: rank r keeps rows [offset_r, offset_r + n_r), where
// the first N % size ranks get one extra row. Uneven splits are laid out padded in the fusion
// buffer (each rank's block at the same stride) so one ncclReduceScatter serves every size.
class NcclReducescatter final : public NcclOp {
 public:
  explicit NcclReducescatter(NcclContext& nccl) : NcclOp(nccl, "reducescatter") {}

 protected:
  Status run(std::vector<TensorTableEntry>& entries, const Response& response,
             const Communicator& group) override {
    ncclComm_t comm = prepare(entries, response, group);
    const ReducePlan plan = reduce_plan(response, group.size());
    for (auto& entry : entries) scatter_one(entry, response.dtype, plan, group, comm);
    nccl_.start_activity(entries, "NCCL_REDUCESCATTER");
    return nccl_.finish_async(entries, name_);
  }

 private:
  void scatter_one(TensorTableEntry& entry, DataType dtype, const ReducePlan& plan, const Communicator& group,
                   ncclComm_t comm) {
    const int size = group.size(), rank = group.rank();
    const TensorShape& shape = entry.input->shape();
    if (shape.empty()) throw NcclFailure("reducescatter needs a tensor of at least one dimension");
    const std::int64_t rows = shape[0], row = row_elements(shape), esize = dtype_size(dtype);
    const std::int64_t base = rows / size, extra = rows % size;
    const std::int64_t block = base + (extra > 0 ? 1 : 0);  // padded rows per rank
    TensorShape out_shape = shape;
    out_shape[0] = base + (rank < extra ? 1 : 0);
    entry.output = allocate_device_output(entry, dtype, out_shape, nccl_.device());
    cudaStream_t stream = nccl_.stream();
    const auto* in = static_cast<const unsigned char*>(entry.input->data());

    const void* send = in;
    if (extra != 0 || plan.prescale != 1.0) {
      auto* buffer = static_cast<unsigned char*>(nccl_.fusion_buffer(size * block * row * esize));
      std::vector<DeviceCopy> copies;
      for (int r = 0; r < size; ++r) {
        const std::int64_t offset = r * base + std::min<std::int64_t>(r, extra);
        const std::int64_t n = base + (r < extra ? 1 : 0);
        copies.push_back({in + offset * row * esize, buffer + r * block * row * esize, n * row * esize});
      }
      check_cuda(batched_device_copy(copies, stream), "copying into the device fusion buffer");
      if (plan.prescale != 1.0) {
        check_cuda(scale_device_buffer(buffer, size * block * row, dtype, plan.prescale, stream),
                   "prescale");
      }
      send = buffer;
    }
    void* out = entry.output->data();
    const std::int64_t mine = out_shape[0] * row;
    if (extra == 0) {
      check_nccl(ncclReduceScatter(send, out, block * row, nccl_datatype(dtype), plan.op,
                                   comm, stream), "ncclReduceScatter", comm);
    } else {
      // In place in the padded buffer, then this rank's real rows out.
      auto* buffer = static_cast<unsigned char*>(const_cast<void*>(send));
      unsigned char* own = buffer + rank * block * row * esize;
      check_nccl(ncclReduceScatter(buffer, own, block * row, nccl_datatype(dtype), plan.op,
                                   comm, stream), "ncclReduceScatter", comm);
      if (mine > 0) {
        check_cuda(cudaMemcpyAsync(out, own, mine * esize, cudaMemcpyDeviceToDevice, stream),
                   "copying out of the device fusion buffer");
      }
    }
    if (plan.postscale != 1.0) {
      check_cuda(scale_device_buffer(out, mine, dtype, plan.postscale, stream), "postscale");
    }
  }
};

}  // namespace

std::unique_ptr<CollectiveOp> make_nccl_alltoall(NcclContext& nccl) {
  return std::make_unique<NcclAlltoall>(nccl);
}
std::unique_ptr<CollectiveOp> make_nccl_reducescatter(NcclContext& nccl) {
  return std::make_unique<NcclReducescatter>(nccl);
}

}  // namespace hvd::detail
