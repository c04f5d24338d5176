// Alltoall and reducescatter on NCCL: the ops whose output shape depends on the other ranks.
#include <cstring>

#include "backends/nccl/nccl_errors.h"
#include "backends/nccl/nccl_kernels.h"
#include "backends/nccl/nccl_ops.h"
#include "core/integer_average.h"

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

// Alltoall: rows of the first dimension go to each rank by entry.splits (empty: even). The
// receive counts of every entry are exchanged through the group's control channel first (host
// integers on the background thread) and every output allocated, then one grouped
// ncclSend/ncclRecv per entry moves the data.
class NcclAlltoall final : public NcclOp {
 public:
  explicit NcclAlltoall(NcclContext& nccl) : NcclOp(nccl, "alltoall") {}

 protected:
  Status run(std::vector<TensorTableEntry>& entries, const Response& response,
             const Communicator& group) override {
    ncclComm_t comm = prepare(entries, response, group);
    const int size = group.size();
    std::vector<std::vector<std::int64_t>> sends(entries.size()), recvs(entries.size());
    for (std::size_t t = 0; t < entries.size(); ++t) {
      auto& entry = entries[t];
      const TensorShape& shape = entry.input->shape();
      if (shape.empty()) throw NcclFailure("alltoall needs a tensor of at least one dimension");
      sends[t] = send_splits(entry, shape[0], size);
      recvs[t] = exchange_splits(group, sends[t]);
      TensorShape out_shape = shape;
      out_shape[0] = 0;
      for (auto r : recvs[t]) out_shape[0] += r;
      allocate_device_output(entry, response.dtype, out_shape, nccl_.device());
      entry.received_splits = recvs[t];
    }
    nccl_.wait_for_outputs(entries);
    nccl_.start_activity(entries, "NCCL_ALLTOALL");
    Launch launch(nccl_);
    for (std::size_t t = 0; t < entries.size(); ++t) exchange_one(entries[t], sends[t], recvs[t], response.dtype, comm, launch);
    launch.collectives_done();
    return nccl_.finish_async(entries, name_, launch);
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

  void exchange_one(TensorTableEntry& entry, const std::vector<std::int64_t>& sends, const std::vector<std::int64_t>& recvs,
                    DataType dtype, ncclComm_t comm, Launch& launch) {
    const std::int64_t row_bytes = row_elements(entry.input->shape()) * dtype_size(dtype);
    const auto* in = static_cast<const unsigned char*>(entry.input->data());
    auto* out = static_cast<unsigned char*>(entry.output->data());
    // Bytes as ncclUint8 sidestep counts that overflow for wide rows of large dtypes.
    launch.group(comm, [&] {
      std::int64_t send_off = 0, recv_off = 0;
      for (std::size_t peer = 0; peer < sends.size(); ++peer) {
        if (sends[peer] > 0) {
          launch.collective("ncclSend", comm, [&] {
            return ncclSend(in + send_off, sends[peer] * row_bytes, ncclUint8, static_cast<int>(peer), comm, nccl_.stream());
          });
        }
        if (recvs[peer] > 0) {
          launch.collective("ncclRecv", comm, [&] {
            return ncclRecv(out + recv_off, recvs[peer] * row_bytes, ncclUint8, static_cast<int>(peer), comm, nccl_.stream());
          });
        }
        send_off += sends[peer] * row_bytes;
        recv_off += recvs[peer] * row_bytes;
      }
    });
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
    const ReducePlan plan = reduce_plan(response);
    const ncclDataType_t type = plan.wire_type(response.dtype);
    const int size = group.size(), rank = group.rank();
    std::int64_t staging = 0;  // bytes of the padded layout, the largest entry's
    for (auto& entry : entries) {
      const TensorShape& shape = entry.input->shape();
      if (shape.empty()) throw NcclFailure("reducescatter needs a tensor of at least one dimension");
      const std::int64_t rows = shape[0], base = rows / size, extra = rows % size;
      TensorShape out_shape = shape;
      out_shape[0] = base + (rank < extra ? 1 : 0);
      allocate_device_output(entry, response.dtype, out_shape, nccl_.device());
      const std::int64_t padded = size * (base + (extra > 0 ? 1 : 0)) * row_elements(shape);
      if (extra != 0 || plan.prescale != 1.0 || plan.through_words)
        staging = std::max(staging, staged_bytes(padded, response.dtype, plan));
    }
    void* buffer = staging > 0 ? nccl_.fusion_buffer(static_cast<std::size_t>(staging)) : nullptr;
    nccl_.wait_for_outputs(entries);
    nccl_.start_activity(entries, "NCCL_REDUCESCATTER");
    Launch launch(nccl_);
    for (auto& entry : entries) scatter_one(entry, response.dtype, type, plan, size, rank, comm, buffer, launch);
    launch.collectives_done();
    // Postscale after every collective: a failure in it concerns this rank's outputs only.
    if (plan.postscale != 1.0) {
      for (auto& entry : entries) {
        launch.local("postscale", [&] {
          return scale_device_buffer(entry.output->data(), entry.output->num_elements(), response.dtype, plan.postscale,
                                     nccl_.stream());
        });
      }
    }
    return nccl_.finish_async(entries, name_, launch);
  }

 private:
  // The padded layout in the dtype, then (through_words) its int64 words, 64-byte aligned.
  static std::int64_t data_bytes(std::int64_t padded, DataType dtype) {
    return (padded * dtype_size(dtype) + 63) / 64 * 64;
  }
  static std::int64_t staged_bytes(std::int64_t padded, DataType dtype, const ReducePlan& plan) {
    return data_bytes(padded, dtype) + (plan.through_words ? average_word_bytes(padded, dtype) : 0);
  }

  void scatter_one(TensorTableEntry& entry, DataType dtype, ncclDataType_t type, const ReducePlan& plan, int size,
                   int rank, ncclComm_t comm, void* staging, Launch& launch) {
    const TensorShape& shape = entry.input->shape();
    const std::int64_t rows = shape[0], row = row_elements(shape), esize = dtype_size(dtype);
    const std::int64_t base = rows / size, extra = rows % size;
    const std::int64_t block = base + (extra > 0 ? 1 : 0);  // padded rows per rank
    cudaStream_t stream = nccl_.stream();
    const auto* in = static_cast<const unsigned char*>(entry.input->data());
    void* out = entry.output->data();
    const std::int64_t mine = entry.output->shape()[0] * row;

    const bool staged = extra != 0 || plan.prescale != 1.0;
    if (!staged && !plan.through_words) {
      launch.collective("ncclReduceScatter", comm,
                        [&] { return ncclReduceScatter(in, out, block * row, type, plan.op, comm, stream); });
      return;
    }
    // Through the padded layout in the fusion buffer, reduced in place, then this rank's real rows out.
    auto* buffer = static_cast<unsigned char*>(staging);
    if (staged) {
      std::vector<DeviceCopy> copies;
      for (int r = 0; r < size; ++r) {
        const std::int64_t offset = r * base + std::min<std::int64_t>(r, extra);
        const std::int64_t n = base + (r < extra ? 1 : 0);
        copies.push_back({in + offset * row * esize, buffer + r * block * row * esize, n * row * esize});
      }
      launch.local("copying into the device fusion buffer", [&] { return batched_device_copy(copies, stream); });
    }
    if (plan.prescale != 1.0) {
      launch.local("prescale", [&] { return scale_device_buffer(buffer, size * block * row, dtype, plan.prescale, stream); });
    }
    if (plan.through_words) {
      // The padded layout (staged, or the input itself) as int64 words; this rank's block of
      // reduced words divided straight into its output.
      const std::int64_t padded = size * block * row, words = average_words(dtype);
      auto* wide = reinterpret_cast<std::int64_t*>(buffer + data_bytes(padded, dtype));
      std::int64_t* own_words = wide + rank * block * row * words;
      const void* source = staged ? static_cast<const void*>(buffer) : static_cast<const void*>(in);
      launch.local("widening integers into int64 words",
                   [&] { return widen_device_for_average(source, padded, dtype, wide, stream); });
      launch.collective("ncclReduceScatter", comm, [&] {
        return ncclReduceScatter(wide, own_words, block * row * words, ncclInt64, plan.op, comm, stream);
      });
      if (mine > 0) {
        launch.local("narrowing the int64 words", [&] {
          return finish_device_average(own_words, mine, dtype, plan.divisor(size), out, stream);
        });
      }
      return;
    }
    unsigned char* own = buffer + rank * block * row * esize;
    launch.collective("ncclReduceScatter", comm,
                      [&] { return ncclReduceScatter(buffer, own, block * row, type, plan.op, comm, stream); });
    // Before the next entry's collective, so a failure here is still one every rank must see.
    if (mine > 0) {
      launch.local("copying out of the device fusion buffer",
                   [&] { return cudaMemcpyAsync(out, own, mine * esize, cudaMemcpyDeviceToDevice, stream); });
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
