#include "backends/mpi/mpi_adasum.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/mpi/mpi_activity.h"
#include "backends/mpi/mpi_world.h"
#include "core/half.h"
#include "core/host_scale.h"

namespace hvd::detail {
namespace {

constexpr int kAdasumTag = 0x4164;  // point-to-point on the group's data communicator

// Each floating dtype as stored, read and written as double: the dot products and the
// combination are computed in double, whatever the storage.
struct Float32 {
  using T = float;
  static double load(T v) { return v; }
  static T store(double v) { return static_cast<T>(v); }
};
struct Float64 {
  using T = double;
  static double load(T v) { return v; }
  static T store(double v) { return v; }
};
struct Float16 {
  using T = std::uint16_t;
  static double load(T v) { return half_to_float(v); }
  static T store(double v) { return float_to_half(static_cast<float>(v)); }
};
struct BFloat16 {
  using T = std::uint16_t;
  static double load(T v) { return bfloat16_to_float(v); }
  static T store(double v) { return float_to_bfloat16(static_cast<float>(v)); }
};

Status exchange(const void* send, std::int64_t send_bytes, void* recv, std::int64_t recv_bytes, int partner,
                MPI_Comm comm) {
  const int code = MPI_Sendrecv(send, static_cast<int>(send_bytes), MPI_BYTE, partner, kAdasumTag, recv,
                                static_cast<int>(recv_bytes), MPI_BYTE, partner, kAdasumTag, comm, MPI_STATUS_IGNORE);
  return code == MPI_SUCCESS ? Status::ok() : Status::error(mpi_error_message("MPI_Sendrecv (Adasum)", code));
}

// Note [Adasum's tree]: at level d (1, 2, 4, ...) rank r pairs with r ^ d. The pair holds the
// same range of the two vectors being combined: the result of the subtree of ranks with bit d
// clear ("a") and of the one with it set ("b"). Each keeps half of the range (bit d clear: the
// first half) and receives the partner's values for it, so after log2(n) levels each rank holds
// 1/n of the result, which the levels in reverse order gather back (recursive halving, then
// doubling). The dot products a.b, |a|^2 and |b|^2 of a tensor at level d are spread over the 2d
// ranks of the block; they add up by recursive doubling, where each step adds the same two
// partial sums on both sides, so every rank of the block gets bitwise the same sums and the same
// coefficients, and the ranks end with identical results.
//
// Starting at a level L > 1 (Note [Adasum of a node's chunk], backends/nccl/nccl_adasum.cc), the
// L ranks of each aligned block hold disjoint pieces of one vector: a rank's partner r ^ d
// (d >= L) holds the same piece of another, and the dot-product sums over the 2d ranks of the
// block then also add the other pieces' parts, so the coefficients are those of the whole
// vectors. The gather stops at L, each rank holding its own piece again.
class Adasum {
 public:
  Adasum(MPI_Comm comm, int rank, int size, int first_level, const std::vector<std::int64_t>& starts)
      : comm_(comm), rank_(rank), size_(size), first_level_(first_level), starts_(starts) {}

  template <class E>
  Status run(typename E::T* data, std::vector<typename E::T>& theirs) {
    using T = typename E::T;
    const std::size_t tensors = starts_.size() - 1;
    std::vector<double> dots(3 * tensors), incoming(3 * tensors);
    std::vector<std::pair<std::int64_t, std::int64_t>> wholes;  // the range each level halved
    std::int64_t lo = 0, hi = starts_.back();
    for (int d = first_level_; d < size_; d <<= 1) {
      const bool first_half = (rank_ & d) == 0;
      const std::int64_t mid = lo + (hi - lo) / 2;
      const std::int64_t keep_lo = first_half ? lo : mid, keep_hi = first_half ? mid : hi;
      const std::int64_t give_lo = first_half ? mid : lo, give_hi = first_half ? hi : mid;
      theirs.resize(static_cast<std::size_t>(keep_hi - keep_lo));
      Status s = exchange(data + give_lo, (give_hi - give_lo) * static_cast<std::int64_t>(sizeof(T)), theirs.data(),
                          (keep_hi - keep_lo) * static_cast<std::int64_t>(sizeof(T)), rank_ ^ d, comm_);
      if (!s.is_ok()) return s;
      const T* a = first_half ? data + keep_lo : theirs.data();
      const T* b = first_half ? theirs.data() : data + keep_lo;
      std::fill(dots.begin(), dots.end(), 0.0);
      for_each_tensor(keep_lo, keep_hi, [&](std::size_t t, std::int64_t from, std::int64_t to) {
        double ab = 0, aa = 0, bb = 0;
        for (std::int64_t i = from; i < to; ++i) {
          const double x = E::load(a[i - keep_lo]), y = E::load(b[i - keep_lo]);
          ab += x * y;
          aa += x * x;
          bb += y * y;
        }
        dots[3 * t] = ab, dots[3 * t + 1] = aa, dots[3 * t + 2] = bb;
      });
      // Over every rank of the block, those below first_level_ included.
      for (int e = 1; e < 2 * d; e <<= 1) {
        const std::int64_t bytes = static_cast<std::int64_t>(dots.size() * sizeof(double));
        s = exchange(dots.data(), bytes, incoming.data(), bytes, rank_ ^ e, comm_);
        if (!s.is_ok()) return s;
        for (std::size_t j = 0; j < dots.size(); ++j) dots[j] += incoming[j];
      }
      T* out = data + keep_lo;
      for_each_tensor(keep_lo, keep_hi, [&](std::size_t t, std::int64_t from, std::int64_t to) {
        const double ab = dots[3 * t], aa = dots[3 * t + 1], bb = dots[3 * t + 2];
        // A zero vector has nothing to project: its partner passes unchanged.
        const double ca = aa > 0 ? 1.0 - ab / (2.0 * aa) : 1.0, cb = bb > 0 ? 1.0 - ab / (2.0 * bb) : 1.0;
        for (std::int64_t i = from; i < to; ++i)
          out[i - keep_lo] = E::store(ca * E::load(a[i - keep_lo]) + cb * E::load(b[i - keep_lo]));
      });
      wholes.emplace_back(lo, hi);
      lo = keep_lo, hi = keep_hi;
    }
    for (int d = size_ / 2; d >= first_level_; d /= 2) {
      const auto [whole_lo, whole_hi] = wholes.back();
      wholes.pop_back();
      const std::int64_t mid = whole_lo + (whole_hi - whole_lo) / 2;
      const bool first_half = (rank_ & d) == 0;
      const std::int64_t other_lo = first_half ? mid : whole_lo, other_hi = first_half ? whole_hi : mid;
      Status s = exchange(data + lo, (hi - lo) * static_cast<std::int64_t>(sizeof(T)), data + other_lo,
                          (other_hi - other_lo) * static_cast<std::int64_t>(sizeof(T)), rank_ ^ d, comm_);
      if (!s.is_ok()) return s;
      lo = whole_lo, hi = whole_hi;
    }
    return Status::ok();
  }

 private:
  // Calls f(tensor, from, to) for each tensor's part of [lo, hi) (buffer positions).
  template <class F>
  void for_each_tensor(std::int64_t lo, std::int64_t hi, F&& f) const {
    for (std::size_t t = 0; t + 1 < starts_.size(); ++t) {
      const std::int64_t from = std::max(lo, starts_[t]), to = std::min(hi, starts_[t + 1]);
      if (from < to) f(t, from, to);
    }
  }

  MPI_Comm comm_;
  int rank_, size_, first_level_;
  const std::vector<std::int64_t>& starts_;
};

class MpiAdasum final : public CollectiveOp {
 public:
  explicit MpiAdasum(OpContext& context) : context_(context) {}
  const char* backend() const override { return "MPI"; }

  bool enabled(const Response& response, const std::vector<TensorTableEntry>& entries, const Communicator&) const override {
    // Host memory (device tensors come staged through host memory: nccl_staged_mpi_ops.cc).
    return response.reduce_op == ReduceOp::Adasum &&
           (entries.empty() ? response.device : entries.front().device) == kCpuDevice;
  }

  Status execute(std::vector<TensorTableEntry>& entries, const Response& response, const Communicator& group) override {
    const int size = group.size();
    // On the node-major group each local rank brings its piece of its node's vector and the tree
    // starts above the node (Note [Adasum of a node's chunk]); elsewhere at the first level.
    const bool chunks = group.id() == Communicator::kNodeMajorId;
    const int first_level = chunks ? context_.world.local_size() : 1;
    if (first_level & (first_level - 1))
      return Status::error("internal: Adasum of a node's chunks on " + std::to_string(first_level) + " local ranks");
    const int participants = size / first_level;
    if (participants & (participants - 1)) {
      std::string has = group.id() == 0 ? "the job has " + std::to_string(size)
                        : group.id() == Communicator::kCrossId || chunks
                            ? "the job has " + std::to_string(participants) +
                                  " nodes (device tensors average within each node, then combine across the nodes)"
                            : "process set " + std::to_string(group.id()) + " has " + std::to_string(size);
      return Status::error("Adasum needs a power-of-two number of ranks, and " + has);
    }
    const DataType dtype = response.dtype;
    const std::int64_t esize = dtype_size(dtype);
    std::vector<std::int64_t> starts{0};
    for (const auto& e : entries) starts.push_back(starts.back() + e.input->num_elements());
    const std::int64_t total = starts.back();
    // Each message carries half of the buffer at most.
    if ((total - total / 2) * esize > INT_MAX)
      return Status::error("an Adasum allreduce of " + std::to_string(total) + " " + dtype_name(dtype) +
                           " elements sends more than 2^31-1 bytes in one message, beyond MPI's int counts");
    buffer_.resize(static_cast<std::size_t>(total * esize));
    {
      Activity a(context_.timeline, entries, "MEMCPY_IN_FUSION_BUFFER");
      for (std::size_t t = 0; t < entries.size(); ++t)
        copy_scaled(buffer_.data() + starts[t] * esize, entries[t].input->data(), entries[t].input->num_elements(),
                    dtype, response.prescale_factor);
    }
    Status status = Status::ok();
    {
      Activity a(context_.timeline, entries, "MPI_ADASUM_ALLREDUCE");
      Adasum adasum(mpi_comm(group), group.rank(), size, first_level, starts);
      switch (dtype) {
        case DataType::Float32: status = adasum.run<Float32>(reinterpret_cast<float*>(buffer_.data()), f32_); break;
        case DataType::Float64: status = adasum.run<Float64>(reinterpret_cast<double*>(buffer_.data()), f64_); break;
        case DataType::Float16:
          status = adasum.run<Float16>(reinterpret_cast<std::uint16_t*>(buffer_.data()), u16_);
          break;
        case DataType::BFloat16:
          status = adasum.run<BFloat16>(reinterpret_cast<std::uint16_t*>(buffer_.data()), u16_);
          break;
        default: status = Status::error(std::string("Adasum of ") + dtype_name(dtype) + " tensors");  // refused at submission
      }
    }
    if (!status.is_ok()) return status;
    Activity a(context_.timeline, entries, "MEMCPY_OUT_FUSION_BUFFER");
    for (std::size_t t = 0; t < entries.size(); ++t)
      copy_scaled(entries[t].output->data(), buffer_.data() + starts[t] * esize, entries[t].output->num_elements(),
                  dtype, response.postscale_factor);
    return Status::ok();
  }

 private:
  OpContext& context_;
  // Grown on demand, never shrunk: the packed tensors and the partner's half at each level.
  std::vector<unsigned char> buffer_;
  std::vector<float> f32_;
  std::vector<double> f64_;
  std::vector<std::uint16_t> u16_;
};

}  // namespace

std::unique_ptr<CollectiveOp> make_mpi_adasum(OpContext& context) { return std::make_unique<MpiAdasum>(context); }

}  // namespace hvd::detail
