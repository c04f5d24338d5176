#include "backends/mpi/mpi_ops.h"

#include <climits>
#include <cstring>
#include <numeric>

#include "backends/mpi/mpi_world.h"
#include "core/copy_bytes.h"
#include "core/host_scale.h"
#include "timeline/timeline.h"

namespace hvd::detail {
namespace {

constexpr std::int64_t kMaxChunk = std::int64_t{1} << 30;  // elements per MPI call (int counts)

// Marks one activity on every entry's timeline row for the lifetime of the object.
class Activity {
 public:
  Activity(Timeline& timeline, const std::vector<TensorTableEntry>& entries, const char* name)
      : timeline_(timeline), entries_(entries) {
    for (const auto& e : entries_) timeline_.activity_start(e.name, name);
  }
  ~Activity() {
    for (const auto& e : entries_) timeline_.activity_end(e.name);
  }

 private:
  Timeline& timeline_;
  const std::vector<TensorTableEntry>& entries_;
};

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
  bool enabled(const Response&, const std::vector<TensorTableEntry>& entries) const override {
    // Device tensors only with a CUDA-aware MPI, which the user asks for explicitly.
    return entries.empty() || entries.front().device == kCpuDevice || context_.settings.gpu_operations == "mpi";
  }

 protected:
  // The group whose response runs (the world or a process set), as the Runtime set it.
  const Communicator& group() const { return *context_.communicator; }
  MPI_Comm comm() const { return mpi_comm(group()); }
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

  Status execute(std::vector<TensorTableEntry>& entries, const Response& response) override {
    std::vector<TensorTableEntry*> direct, packed;
    for (auto& e : entries)
      (entries.size() == 1 || e.input->size_bytes() >= kDirectBytes ? direct : packed).push_back(&e);
    std::int64_t packed_count = 0;
    void* buffer = nullptr;
    if (!packed.empty()) {
      Activity a(context_.timeline, entries, "MEMCPY_IN_FUSION_BUFFER");
      buffer = pack(packed, &packed_count);
    }
    for (auto* e : direct)
      if (e->input->data() != e->output->data()) copy_bytes(e->output->data(), e->input->data(), e->input->size_bytes());
    Status status = Status::ok();
    {
      Activity a(context_.timeline, entries, "MPI_ALLREDUCE");
      if (buffer != nullptr) status = reduce(buffer, packed_count, response);
      for (auto* e : direct)
        if (status.is_ok()) status = reduce(e->output->data(), e->output->num_elements(), response);
    }
    if (!status.is_ok()) return status;
    if (!packed.empty()) {
      Activity a(context_.timeline, entries, "MEMCPY_OUT_FUSION_BUFFER");
      const auto* at = static_cast<const unsigned char*>(buffer);
      for (auto* e : packed) {
        copy_bytes(e->output->data(), at, e->output->size_bytes());
        at += e->output->size_bytes();
      }
    }
    return Status::ok();
  }

 private:
  void* pack(const std::vector<TensorTableEntry*>& packed, std::int64_t* count) {
    std::int64_t bytes = 0;
    for (const auto* e : packed) bytes += e->input->size_bytes();
    *count = bytes / dtype_size(packed.front()->input->dtype());
    void* buffer = context_.host_fusion_buffer.get(static_cast<std::size_t>(bytes));
    auto* at = static_cast<unsigned char*>(buffer);
    for (const auto* e : packed) {
      copy_bytes(at, e->input->data(), e->input->size_bytes());
      at += e->input->size_bytes();
    }
    return buffer;
  }

  // Prescale, allreduce and postscale (with the 1/size of Average) of `count` elements in place.
  Status reduce(void* buffer, std::int64_t count, const Response& response) {
    scale_host_buffer(buffer, count, response.dtype, response.prescale_factor);
    Status status = world_.allreduce_in_pieces(buffer, count, response.dtype, response.reduce_op, comm());
    if (!status.is_ok()) return status;
    const double average = response.reduce_op == ReduceOp::Average ? 1.0 / group().size() : 1.0;
    scale_host_buffer(buffer, count, response.dtype, response.postscale_factor * average);
    return Status::ok();
  }
};

class MpiAllgather final : public MpiOp {
 public:
  using MpiOp::MpiOp;
  Status execute(std::vector<TensorTableEntry>& entries, const Response& response) override {
    auto& e = entries.front();
    const std::int64_t row_bytes = row_elements(e.input->shape()) * dtype_size(e.input->dtype());
    std::vector<std::int64_t> bytes(response.first_dims.size());
    TensorShape shape = e.input->shape();
    shape[0] = 0;
    for (std::size_t r = 0; r < bytes.size(); ++r) {
      bytes[r] = response.first_dims[r] * row_bytes;
      shape[0] += response.first_dims[r];
    }
    allocate_output(e, shape);
    std::vector<int> counts, displs;
    if (!to_int_counts(bytes, &counts, &displs)) return too_large(e);
    Activity a(context_.timeline, entries, "MPI_ALLGATHER");
    return mpi_result(MPI_Allgatherv(e.input->data(), counts[group().rank()], MPI_BYTE, e.output->data(),
                                     counts.data(), displs.data(), MPI_BYTE, comm()),
                      "MPI_Allgatherv");
  }
};

class MpiBroadcast final : public MpiOp {
 public:
  using MpiOp::MpiOp;
  Status execute(std::vector<TensorTableEntry>& entries, const Response& response) override {
    auto& e = entries.front();
    const std::int64_t total = e.input->size_bytes();
    if (group().rank() == response.root && e.input->data() != e.output->data())
      copy_bytes(e.output->data(), e.input->data(), total);
    Activity a(context_.timeline, entries, "MPI_BCAST");
    auto* bytes = static_cast<unsigned char*>(e.output->data());
    for (std::int64_t offset = 0; offset < total; offset += kMaxChunk) {
      const int n = static_cast<int>(std::min(kMaxChunk, total - offset));
      Status s = mpi_result(MPI_Bcast(bytes + offset, n, MPI_BYTE, response.root, comm()), "MPI_Bcast");
      if (!s.is_ok()) return s;
    }
    return Status::ok();
  }
};

class MpiAlltoall final : public MpiOp {
 public:
  using MpiOp::MpiOp;
  Status execute(std::vector<TensorTableEntry>& entries, const Response&) override {
    auto& e = entries.front();
    const int size = group().size();
    std::vector<std::int64_t> received(size);
    Status s = mpi_result(MPI_Alltoall(e.splits.data(), 1, MPI_INT64_T, received.data(), 1, MPI_INT64_T, comm()),
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
                                    rd.data(), MPI_BYTE, comm()),
                      "MPI_Alltoallv");
  }
};

class MpiReducescatter final : public MpiOp {
 public:
  using MpiOp::MpiOp;
  Status execute(std::vector<TensorTableEntry>& entries, const Response& response) override {
    auto& e = entries.front();
    const int size = group().size();
    const DataType dtype = e.input->dtype();
    const std::int64_t rows = e.input->shape().front();
    const std::int64_t row = row_elements(e.input->shape());
    std::vector<std::int64_t> counts(size);
    for (int r = 0; r < size; ++r) counts[r] = (rows / size + (r < rows % size ? 1 : 0)) * row;
    TensorShape shape = e.input->shape();
    shape[0] = counts[group().rank()] / (row == 0 ? 1 : row);
    if (row == 0) shape[0] = rows / size + (group().rank() < rows % size ? 1 : 0);
    allocate_output(e, shape);
    std::vector<int> int_counts, displs;
    if (!to_int_counts(counts, &int_counts, &displs)) return too_large(e);
    const void* send = e.input->data();
    if (response.prescale_factor != 1.0) {
      void* scratch = context_.host_fusion_buffer.get(static_cast<std::size_t>(e.input->size_bytes()));
      copy_bytes(scratch, send, e.input->size_bytes());
      scale_host_buffer(scratch, e.input->num_elements(), dtype, response.prescale_factor);
      send = scratch;
    }
    {
      Activity a(context_.timeline, entries, "MPI_REDUCESCATTER");
      Status s = mpi_result(MPI_Reduce_scatter(send, e.output->data(), int_counts.data(), world_.types().datatype(dtype),
                                               world_.types().reduce_op(dtype, response.reduce_op), comm()),
                            "MPI_Reduce_scatter");
      if (!s.is_ok()) return s;
    }
    const double average = response.reduce_op == ReduceOp::Average ? 1.0 / size : 1.0;
    scale_host_buffer(e.output->data(), e.output->num_elements(), dtype, response.postscale_factor * average);
    return Status::ok();
  }
};

class MpiBarrier final : public MpiOp {
 public:
  using MpiOp::MpiOp;
  bool enabled(const Response&, const std::vector<TensorTableEntry>&) const override { return true; }
  Status execute(std::vector<TensorTableEntry>&, const Response&) override {
    // Negotiation already proved every rank arrived; this only orders the data traffic.
    return mpi_result(MPI_Barrier(comm()), "MPI_Barrier");
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
