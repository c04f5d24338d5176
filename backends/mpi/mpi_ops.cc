#include "backends/mpi/mpi_ops.h"

#include <climits>
#include <cstring>
#include <numeric>

#include "backends/mpi/mpi_activity.h"
#include "backends/mpi/mpi_world.h"
#include "core/copy_bytes.h"
#include "core/host_scale.h"
#include "core/integer_average.h"

namespace hvd::detail {
namespace {

constexpr std::int64_t kMaxChunk = std::int64_t{1} << 30;  // elements per MPI call (int counts)

Status mpi_result(int code, const char* call) {
  return code == MPI_SUCCESS ? Status::ok() : Status::error(mpi_error_message(call, code));
}

// Byte counts per rank for the v-collectives; MPI takes int counts.
bool to_int_counts(const std::vector<std::int64_t>& in, std::vector<int>* counts, std::vector<int>* displs) {
  counts->resize(in.size());
  displs->resize(in.size());
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] > INT_MAX || offset > INT_MAX) return false;
    (*counts)[i] = static_cast<int>(in[i]);
    (*displs)[i] = static_cast<int>(offset);
    offset += in[i];
  }
  return true;
}

Status too_large(const TensorTableEntry& e) {
  return Status::error("tensor '" + e.name + "' moves more than 2^31-1 bytes to or from one rank, beyond MPI's int counts");
}

std::int64_t row_elements(const TensorShape& shape) {
  return shape.empty() ? 1 : num_elements(TensorShape(shape.begin() + 1, shape.end()));
}

class MpiOp : public CollectiveOp {
 public:
  MpiOp(MpiWorld& world, OpContext& context) : world_(world), context_(context) {}
  const char* backend() const override { return "MPI"; }
  bool enabled(const Response& response, const std::vector<TensorTableEntry>& entries, const Communicator&) const override {
    // Host memory only: these ops pack, scale and copy with host code. Device tensors under
    // HOROVOD_GPU_OPERATIONS=mpi are staged through host memory by the NCCL backend's staging op.
    // Adasum is mpi_adasum.cc's.
    return (entries.empty() ? response.device : entries.front().device) == kCpuDevice &&
           response.reduce_op != ReduceOp::Adasum;
  }

 protected:
  MpiWorld& world_;
  OpContext& context_;
};

class MpiAllreduce final : public MpiOp {
 public:
  using MpiOp::MpiOp;
  // Tensors of kDirectBytes or more are reduced where they lie: copying them through the fusion
  // buffer and back would cost more than the extra call saves. Smaller ones share one pass
  // through the buffer. The split depends only on negotiated shapes, so every rank issues the
  // same calls.
  static constexpr std::int64_t kDirectBytes = std::int64_t{1} << 20;

  Status execute(std::vector<TensorTableEntry>& entries, const Response& response, const Communicator& group) override {
    const MPI_Comm comm = mpi_comm(group);
    std::vector<TensorTableEntry*> direct, packed;
    for (auto& e : entries)
      (entries.size() == 1 || e.input->size_bytes() >= kDirectBytes ? direct : packed).push_back(&e);
    // Integers average exactly in reduce(); floating types take 1/size with the postscale.
    const bool divides = response.reduce_op == ReduceOp::Average && !is_integer(response.dtype);
    const double average = divides ? 1.0 / group.size() : 1.0;
    const double prescale = response.prescale_factor, postscale = response.postscale_factor * average;
    std::int64_t packed_count = 0;
    void* buffer = nullptr;
    if (!packed.empty()) {
      Activity a(context_.timeline, entries, "MEMCPY_IN_FUSION_BUFFER");
      buffer = pack(packed, prescale, &packed_count);
    }
    for (auto* e : direct)
      copy_scaled(e->output->data(), e->input->data(), e->input->num_elements(), response.dtype, prescale);
    Status status = Status::ok();
    {
      Activity a(context_.timeline, entries, "MPI_ALLREDUCE");
      if (buffer != nullptr) status = reduce(buffer, packed_count, response, comm);
      for (auto* e : direct)
        if (status.is_ok()) {
          status = reduce(e->output->data(), e->output->num_elements(), response, comm);
          if (status.is_ok()) scale_host_buffer(e->output->data(), e->output->num_elements(), response.dtype, postscale);
        }
    }
    if (!status.is_ok()) return status;
    if (!packed.empty()) {
      Activity a(context_.timeline, entries, "MEMCPY_OUT_FUSION_BUFFER");
      const auto* at = static_cast<const unsigned char*>(buffer);
      for (auto* e : packed) {
        copy_scaled(e->output->data(), at, e->output->num_elements(), response.dtype, postscale);
        at += e->output->size_bytes();
      }
    }
    return Status::ok();
  }

 private:
  // Copies the tensors into the fusion buffer, prescaled on the way.
  void* pack(const std::vector<TensorTableEntry*>& packed, double prescale, std::int64_t* count) {
    std::int64_t bytes = 0;
    for (const auto* e : packed) bytes += e->input->size_bytes();
    *count = bytes / dtype_size(packed.front()->input->dtype());
    void* buffer = context_.host_fusion_buffer.get(static_cast<std::size_t>(bytes));
    auto* at = static_cast<unsigned char*>(buffer);
    for (const auto* e : packed) {
      copy_scaled(at, e->input->data(), e->input->num_elements(), e->input->dtype(), prescale);
      at += e->input->size_bytes();
    }
    return buffer;
  }

  // The allreduce of `count` elements in place; the caller scales before and after, folded into
  // the copies through the fusion buffer where there are copies.
  Status reduce(void* buffer, std::int64_t count, const Response& response, MPI_Comm comm) {
    if (response.reduce_op == ReduceOp::Average && is_integer(response.dtype))
      return world_.allreduce_integer_average(buffer, count, response.dtype, comm, wide_);
    return world_.allreduce_in_pieces(buffer, count, response.dtype, response.reduce_op, comm);
  }

  std::vector<std::int64_t> wide_;  // integer Average's words; grown on demand, never shrunk
};

// One MPI_Allgatherv for every tensor of a (possibly fused) response. response.first_dims holds
// one block of per-rank first dimensions per tensor. A lone tensor is gathered where it lies;
// several are packed (this rank's rows of each, in order) and unpacked from the gathered
// per-rank blocks into each output.
class MpiAllgather final : public MpiOp {
 public:
  using MpiOp::MpiOp;
  Status execute(std::vector<TensorTableEntry>& entries, const Response& response, const Communicator& group) override {
    const int size = group.size(), me = group.rank();
    const MPI_Comm comm = mpi_comm(group);
    if (response.first_dims.size() != entries.size() * static_cast<std::size_t>(size))
      return Status::error("internal: the allgather response carries " + std::to_string(response.first_dims.size()) +
                           " first dimensions for " + std::to_string(entries.size()) + " tensor(s) on " +
                           std::to_string(size) + " ranks");
    std::vector<std::int64_t> row_bytes(entries.size()), rank_bytes(size, 0);
    for (std::size_t t = 0; t < entries.size(); ++t) {
      auto& e = entries[t];
      row_bytes[t] = row_elements(e.input->shape()) * dtype_size(e.input->dtype());
      TensorShape shape = e.input->shape();
      shape[0] = 0;
      for (int r = 0; r < size; ++r) {
        shape[0] += first_dim(response, t, r);
        rank_bytes[r] += first_dim(response, t, r) * row_bytes[t];
      }
      allocate_output(e, shape);
    }
    std::vector<int> counts, displs;
    if (!to_int_counts(rank_bytes, &counts, &displs)) return too_large(entries.front());
    if (entries.size() == 1) {
      auto& e = entries.front();
      Activity a(context_.timeline, entries, "MPI_ALLGATHER");
      return gather(e.input->data(), counts, displs, e.output->data(), me, comm);
    }
    const std::int64_t total = std::int64_t{displs.back()} + counts.back();
    auto* send = static_cast<unsigned char*>(context_.host_fusion_buffer.get(static_cast<std::size_t>(rank_bytes[me] + total)));
    unsigned char* recv = send + rank_bytes[me];
    {
      Activity a(context_.timeline, entries, "MEMCPY_IN_FUSION_BUFFER");
      unsigned char* at = send;
      for (auto& e : entries) {
        copy_bytes(at, e.input->data(), e.input->size_bytes());
        at += e.input->size_bytes();
      }
    }
    {
      Activity a(context_.timeline, entries, "MPI_ALLGATHER");
      Status s = gather(send, counts, displs, recv, me, comm);
      if (!s.is_ok()) return s;
    }
    Activity a(context_.timeline, entries, "MEMCPY_OUT_FUSION_BUFFER");
    std::vector<std::int64_t> written(entries.size(), 0);  // bytes of each output filled so far
    const unsigned char* at = recv;
    for (int r = 0; r < size; ++r) {
      for (std::size_t t = 0; t < entries.size(); ++t) {
        const std::int64_t bytes = first_dim(response, t, r) * row_bytes[t];
        copy_bytes(static_cast<unsigned char*>(entries[t].output->data()) + written[t], at, bytes);
        written[t] += bytes;
        at += bytes;
      }
    }
    return Status::ok();
  }

 private:
  static std::int64_t first_dim(const Response& response, std::size_t tensor, int rank) {
    const std::size_t ranks = response.first_dims.size() / (response.names.empty() ? 1 : response.names.size());
    return response.first_dims[tensor * ranks + static_cast<std::size_t>(rank)];
  }
  static Status gather(const void* send, const std::vector<int>& counts, const std::vector<int>& displs, void* recv,
                       int me, MPI_Comm comm) {
    return mpi_result(MPI_Allgatherv(send, counts[me], MPI_BYTE, recv, counts.data(), displs.data(), MPI_BYTE, comm),
                      "MPI_Allgatherv");
  }
};

class MpiBroadcast final : public MpiOp {
 public:
  using MpiOp::MpiOp;
  Status execute(std::vector<TensorTableEntry>& entries, const Response& response, const Communicator& group) override {
    auto& e = entries.front();
    const std::int64_t total = e.input->size_bytes();
    if (group.rank() == response.root && e.input->data() != e.output->data())
      copy_bytes(e.output->data(), e.input->data(), total);
    Activity a(context_.timeline, entries, "MPI_BCAST");
    auto* bytes = static_cast<unsigned char*>(e.output->data());
    for (std::int64_t offset = 0; offset < total; offset += kMaxChunk) {
      const int n = static_cast<int>(std::min(kMaxChunk, total - offset));
      Status s = mpi_result(MPI_Bcast(bytes + offset, n, MPI_BYTE, response.root, mpi_comm(group)), "MPI_Bcast");
      if (!s.is_ok()) return s;
    }
    return Status::ok();
  }
};

class MpiAlltoall final : public MpiOp {
 public:
  using MpiOp::MpiOp;
  Status execute(std::vector<TensorTableEntry>& entries, const Response&, const Communicator& group) override {
    auto& e = entries.front();
    const int size = group.size();
    const MPI_Comm comm = mpi_comm(group);
    std::vector<std::int64_t> received(size);
    Status s = mpi_result(MPI_Alltoall(e.splits.data(), 1, MPI_INT64_T, received.data(), 1, MPI_INT64_T, comm),
                          "MPI_Alltoall");
    if (!s.is_ok()) return s;
    const std::int64_t row_bytes = row_elements(e.input->shape()) * dtype_size(e.input->dtype());
    TensorShape shape = e.input->shape();
    shape[0] = std::accumulate(received.begin(), received.end(), std::int64_t{0});
    allocate_output(e, shape);
    std::vector<std::int64_t> send_bytes(size), recv_bytes(size);
    for (int r = 0; r < size; ++r) {
      send_bytes[r] = e.splits[r] * row_bytes;
      recv_bytes[r] = received[r] * row_bytes;
    }
    std::vector<int> sc, sd, rc, rd;
    if (!to_int_counts(send_bytes, &sc, &sd) || !to_int_counts(recv_bytes, &rc, &rd)) return too_large(e);
    e.received_splits = received;
    Activity a(context_.timeline, entries, "MPI_ALLTOALL");
    return mpi_result(MPI_Alltoallv(e.input->data(), sc.data(), sd.data(), MPI_BYTE, e.output->data(), rc.data(),
                                    rd.data(), MPI_BYTE, comm),
                      "MPI_Alltoallv");
  }
};

// One MPI_Reduce_scatter for every tensor of a (possibly fused) response. Rank r keeps rows
// [offset_r, offset_r + n_r) of each tensor, the first N % size ranks one row more. A lone
// unscaled tensor is scattered where it lies; otherwise the buffer holds, for each rank in turn,
// that rank's rows of every tensor, so each rank receives one contiguous block.
class MpiReducescatter final : public MpiOp {
 public:
  using MpiOp::MpiOp;
  Status execute(std::vector<TensorTableEntry>& entries, const Response& response, const Communicator& group) override {
    const int size = group.size(), me = group.rank();
    const DataType dtype = response.dtype;
    const std::int64_t esize = dtype_size(dtype);
    // counts[t][r]: elements of tensor t that rank r keeps.
    std::vector<std::vector<std::int64_t>> counts(entries.size(), std::vector<std::int64_t>(size));
    std::vector<std::int64_t> rank_counts(size, 0);
    for (std::size_t t = 0; t < entries.size(); ++t) {
      auto& e = entries[t];
      const std::int64_t rows = e.input->shape().front(), row = row_elements(e.input->shape());
      for (int r = 0; r < size; ++r) {
        counts[t][r] = (rows / size + (r < rows % size ? 1 : 0)) * row;
        rank_counts[r] += counts[t][r];
      }
      TensorShape shape = e.input->shape();
      shape[0] = rows / size + (me < rows % size ? 1 : 0);
      allocate_output(e, shape);
    }
    std::vector<int> int_counts, displs;
    if (!to_int_counts(rank_counts, &int_counts, &displs)) return too_large(entries.front());
    const std::int64_t total = std::int64_t{displs.back()} + int_counts.back();
    const bool integer_average = response.reduce_op == ReduceOp::Average && is_integer(dtype);
    const bool direct = entries.size() == 1 && response.prescale_factor == 1.0 && !integer_average;
    const void* send = entries.front().input->data();
    void* recv = entries.front().output->data();
    if (!direct) {
      auto* buffer = static_cast<unsigned char*>(
          context_.host_fusion_buffer.get(static_cast<std::size_t>((total + rank_counts[me]) * esize)));
      Activity a(context_.timeline, entries, "MEMCPY_IN_FUSION_BUFFER");
      pack(entries, counts, buffer, esize);
      scale_host_buffer(buffer, total, dtype, response.prescale_factor);
      send = buffer;
      recv = buffer + total * esize;
    }
    if (integer_average) {
      Activity a(context_.timeline, entries, "MPI_REDUCESCATTER");
      if (Status s = reduce_scatter_integer_average(send, recv, rank_counts, me, dtype, group); !s.is_ok()) return s;
    } else {
      Activity a(context_.timeline, entries, "MPI_REDUCESCATTER");
      Status s = mpi_result(MPI_Reduce_scatter(send, recv, int_counts.data(), world_.types().datatype(dtype),
                                               world_.types().reduce_op(dtype, response.reduce_op), mpi_comm(group)),
                            "MPI_Reduce_scatter");
      if (!s.is_ok()) return s;
    }
    const double average = response.reduce_op == ReduceOp::Average && !integer_average ? 1.0 / size : 1.0;
    scale_host_buffer(recv, rank_counts[me], dtype, response.postscale_factor * average);
    if (!direct) {
      Activity a(context_.timeline, entries, "MEMCPY_OUT_FUSION_BUFFER");
      const auto* at = static_cast<const unsigned char*>(recv);
      for (std::size_t t = 0; t < entries.size(); ++t) {
        copy_bytes(entries[t].output->data(), at, counts[t][me] * esize);
        at += counts[t][me] * esize;
      }
    }
    return Status::ok();
  }

 private:
  // The reducescatter of an integer Average, exact: the packed values travel as int64 words.
  // See Note [Integer averages are exact].
  Status reduce_scatter_integer_average(const void* send, void* recv, const std::vector<std::int64_t>& rank_counts,
                                        int me, DataType dtype, const Communicator& group) {
    const std::int64_t words = average_words(dtype);
    std::vector<std::int64_t> word_counts(rank_counts.size());
    std::int64_t total = 0;
    for (std::size_t r = 0; r < rank_counts.size(); ++r) {
      word_counts[r] = rank_counts[r] * words;
      total += rank_counts[r];
    }
    std::vector<int> counts, displs;
    if (!to_int_counts(word_counts, &counts, &displs))
      return Status::error("an integer average of " + std::to_string(total) +
                           " elements moves more than 2^31-1 words to one rank, beyond MPI's int counts");
    const std::int64_t mine = rank_counts[me] * words;
    wide_.resize(static_cast<std::size_t>(total * words + mine));
    widen_for_average(send, total, dtype, wide_.data());
    std::int64_t* wide_recv = wide_.data() + total * words;
    Status s = mpi_result(MPI_Reduce_scatter(wide_.data(), wide_recv, counts.data(), MPI_INT64_T, MPI_SUM, mpi_comm(group)),
                          "MPI_Reduce_scatter");
    if (s.is_ok()) finish_average(wide_recv, rank_counts[me], dtype, group.size(), recv);
    return s;
  }

  std::vector<std::int64_t> wide_;  // integer Average's words; grown on demand, never shrunk

  static void pack(const std::vector<TensorTableEntry>& entries, const std::vector<std::vector<std::int64_t>>& counts,
                   unsigned char* buffer, std::int64_t esize) {
    std::vector<std::int64_t> read(entries.size(), 0);  // elements of each input packed so far
    for (std::size_t r = 0; r < counts.front().size(); ++r) {
      for (std::size_t t = 0; t < entries.size(); ++t) {
        copy_bytes(buffer, static_cast<const unsigned char*>(entries[t].input->data()) + read[t] * esize,
                   counts[t][r] * esize);
        buffer += counts[t][r] * esize;
        read[t] += counts[t][r];
      }
    }
  }
};

class MpiBarrier final : public MpiOp {
 public:
  using MpiOp::MpiOp;
  bool enabled(const Response&, const std::vector<TensorTableEntry>&, const Communicator&) const override { return true; }
  Status execute(std::vector<TensorTableEntry>&, const Response&, const Communicator& group) override {
    // Negotiation already proved every rank arrived; this only orders the data traffic.
    return mpi_result(MPI_Barrier(mpi_comm(group)), "MPI_Barrier");
  }
};

}  // namespace

void register_mpi_ops(OpRegistry& registry, MpiWorld& world, OpContext& context) {
  registry.add(ResponseType::Allreduce, std::make_unique<MpiAllreduce>(world, context));
  registry.add(ResponseType::Allgather, std::make_unique<MpiAllgather>(world, context));
  registry.add(ResponseType::Broadcast, std::make_unique<MpiBroadcast>(world, context));
  registry.add(ResponseType::Alltoall, std::make_unique<MpiAlltoall>(world, context));
  registry.add(ResponseType::Reducescatter, std::make_unique<MpiReducescatter>(world, context));
  registry.add(ResponseType::Barrier, std::make_unique<MpiBarrier>(world, context));
}

}  // namespace hvd::detail
