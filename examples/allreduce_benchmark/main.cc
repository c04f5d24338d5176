// allreduce_benchmark: one tensor, summed in place, timed three ways in the same launch: raw
// MPI_Allreduce, horovodcpp (allreduce_async(...).wait(): negotiation, cache, collective), and
// LibTorch's c10d ProcessGroupGloo. Columns as in nccl-tests (size, count, type, redop, time,
// algbw, busbw), then the bandwidth ratios ours/raw and ours/gloo (>1: ours is faster).
//
//   mpirun -np 2 ./allreduce_benchmark [--min-bytes 4096] [--max-bytes 67108864] [--step 4]
//       [--dtypes float32,float16] [--rounds 3] [--seconds 0.15] [--no-gloo] [--raw-chunk-bytes 8388608]
//
// Each (dtype, size) first checks every peer's result against the closed form sum_r (r + 1),
// then runs `rounds` rounds of raw, ours, gloo in turn (so drift on a shared machine hits all
// three alike); a round times `iters` back-to-back operations after a barrier, takes the slowest
// rank, and the table shows the median round. Sizes above --raw-chunk-bytes also time raw MPI
// issuing the same buffer in pieces of that size (a second table).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <horovodcpp/horovod.h>

#include "bench_common.h"
#include "core/half.h"
#ifdef HVD_BENCH_WITH_GLOO
#include <ATen/ATen.h>

#include "gloo_group.h"
#endif

namespace {

using hvd::bench::fixed;

// A user-defined MPI sum for float16, as a user of raw MPI would write it (MPI has no half type).
void half_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = hvd::detail::float_to_half(hvd::detail::half_to_float(a[i]) + hvd::detail::half_to_float(b[i]));
}

// Command-line settings, read once by main.
struct Config {
  std::int64_t min_bytes = 4096, max_bytes = 64LL << 20;
  int step = 4, rounds = 3, warmup = 2;
  double seconds = 0.15;  // per peer per round
  std::int64_t raw_chunk_bytes = 8LL << 20;  // the extra raw peer's piece size (0: no extra peer)
  std::vector<hvd::DataType> dtypes;
  bool gloo = true;
};

// The host buffer every peer sums in place (one per size; owned by Runner::run_dtype, main thread).
class Buffer {
 public:
  Buffer(hvd::DataType dtype, std::int64_t count) : dtype_(dtype), count_(count), bytes_(count * hvd::dtype_size(dtype)) {}
  void fill(float value) {
    if (dtype_ == hvd::DataType::Float32) {
      std::fill_n(reinterpret_cast<float*>(bytes_.data()), count_, value);
    } else {
      std::fill_n(reinterpret_cast<std::uint16_t*>(bytes_.data()), count_, hvd::detail::float_to_half(value));
    }
  }
  // Number of elements that differ from `value`.
  std::int64_t mismatches(float value) const {
    std::int64_t wrong = 0;
    for (std::int64_t i = 0; i < count_; ++i) {
      float v;
      if (dtype_ == hvd::DataType::Float32)
        v = reinterpret_cast<const float*>(bytes_.data())[i];
      else
        v = hvd::detail::half_to_float(reinterpret_cast<const std::uint16_t*>(bytes_.data())[i]);
      if (v != value) ++wrong;
    }
    return wrong;
  }
  void* data() { return bytes_.data(); }
  std::int64_t count() const { return count_; }
  std::int64_t bytes() const { return static_cast<std::int64_t>(bytes_.size()); }

 private:
  hvd::DataType dtype_;
  std::int64_t count_;
  std::vector<unsigned char> bytes_;
};

// One way of summing the buffer across ranks: raw MPI, ours or Gloo.
struct Peer {
  std::string name;
  std::function<void()> run_once;
  bool extra = false;  // raw MPI in pieces: reported in its own table
};

// Seconds per operation for `iters` back-to-back runs, slowest rank.
double time_batch(const Peer& peer, int iters, MPI_Comm comm) {
  hvd::bench::quiet_barrier(comm);
  const double start = hvd::bench::now_seconds();
  for (int i = 0; i < iters; ++i) peer.run_once();
  return hvd::bench::max_over_ranks(std::vector<double>{(hvd::bench::now_seconds() - start) / iters}, comm)[0];
}

// Runs the table for each dtype: owns the float16 MPI type and op and the Gloo group. Main thread.
class Runner {
 public:
  Runner(const Config& config, hvd::bench::Session& session) : config_(config), session_(session) {
    MPI_Type_contiguous(2, MPI_BYTE, &half_type_);
    MPI_Type_commit(&half_type_);
    MPI_Op_create(&half_sum, 1, &half_op_);
#ifdef HVD_BENCH_WITH_GLOO
    if (config_.gloo) gloo_ = std::make_unique<hvd::bench::GlooGroup>(session.comm(), session.all_on_one_node());
#endif
  }
  ~Runner() {
    MPI_Op_free(&half_op_);
    MPI_Type_free(&half_type_);
  }

  void run_dtype(hvd::DataType dtype);

 private:
  std::vector<Peer> peers_for(Buffer& buffer, hvd::DataType dtype);
  void check(const std::vector<Peer>& peers, Buffer& buffer);
  std::vector<double> measure(const std::vector<Peer>& peers, hvd::DataType dtype);

  const Config& config_;
  hvd::bench::Session& session_;
  MPI_Datatype half_type_;
  MPI_Op half_op_;
#ifdef HVD_BENCH_WITH_GLOO
  std::unique_ptr<hvd::bench::GlooGroup> gloo_;
#endif
};

std::vector<Peer> Runner::peers_for(Buffer& buffer, hvd::DataType dtype) {
  const bool f32 = dtype == hvd::DataType::Float32;
  MPI_Comm comm = session_.comm();
  MPI_Datatype type = f32 ? MPI_FLOAT : half_type_;
  MPI_Op op = f32 ? MPI_SUM : half_op_;
  std::vector<Peer> peers;
  peers.push_back({"raw MPI", [&buffer, comm, type, op] {
                     MPI_Allreduce(MPI_IN_PLACE, buffer.data(), static_cast<int>(buffer.count()), type, op, comm);
                   }});
  auto tensor = hvd::HostTensor::wrap(buffer.data(), dtype, {buffer.count()});
  const std::string name = std::string("allreduce_benchmark.") + hvd::dtype_name(dtype) + "." + std::to_string(buffer.bytes());
  peers.push_back({"ours", [tensor, name] { hvd::allreduce_async(tensor, tensor, {hvd::ReduceOp::Sum, name}).wait(); }});
  // Large messages: the same raw MPI_Allreduce issued in pieces, which shows what one large call
  // costs Open MPI itself (its temporaries) apart from the runtime.
  const std::int64_t piece = config_.raw_chunk_bytes / hvd::dtype_size(dtype);
  if (config_.raw_chunk_bytes > 0 && buffer.bytes() > config_.raw_chunk_bytes) {
    peers.push_back({"raw MPI in pieces", [&buffer, comm, type, op, piece] {
                       auto* bytes = static_cast<unsigned char*>(buffer.data());
                       const std::int64_t element = buffer.bytes() / buffer.count();
                       for (std::int64_t at = 0; at < buffer.count(); at += piece)
                         MPI_Allreduce(MPI_IN_PLACE, bytes + at * element,
                                       static_cast<int>(std::min(piece, buffer.count() - at)), type, op, comm);
                     }, true});
  }
#ifdef HVD_BENCH_WITH_GLOO
  if (gloo_) {
    auto options = at::TensorOptions().dtype(f32 ? at::kFloat : at::kHalf);
    at::Tensor t = at::from_blob(buffer.data(), {buffer.count()}, options);
    peers.push_back({"gloo", [this, t]() mutable { gloo_->allreduce(t); }});
  }
#endif
  return peers;
}

void Runner::check(const std::vector<Peer>& peers, Buffer& buffer) {
  const int n = session_.size();
  for (const auto& peer : peers) {
    buffer.fill(static_cast<float>(session_.rank() + 1));
    peer.run_once();
    const std::int64_t wrong = buffer.mismatches(static_cast<float>(n * (n + 1) / 2));
    if (hvd::bench::max_over_ranks(static_cast<double>(wrong), session_.comm()) > 0)
      throw std::runtime_error(peer.name + " allreduce of " + std::to_string(buffer.bytes()) +
                               " bytes gave a wrong sum on some rank");
  }
  buffer.fill(0.0f);  // zeros stay finite however many in-place sums follow
}

// Median seconds per operation for each peer.
std::vector<double> Runner::measure(const std::vector<Peer>& peers, hvd::DataType) {
  MPI_Comm comm = session_.comm();
  // One warm-up batch per peer sets the iteration count (the same on every rank).
  double slowest = 0;
  for (const auto& peer : peers) slowest = std::max(slowest, time_batch(peer, config_.warmup, comm));
  const int iters = std::clamp(static_cast<int>(config_.seconds / std::max(slowest, 1e-7)), 2, 2000);
  std::vector<std::vector<double>> rounds(peers.size());
  for (int r = 0; r < config_.rounds; ++r)
    for (std::size_t p = 0; p < peers.size(); ++p) rounds[p].push_back(time_batch(peers[p], iters, comm));
  std::vector<double> out;
  for (auto& samples : rounds) out.push_back(hvd::bench::summarize(samples).median);
  return out;
}

void Runner::run_dtype(hvd::DataType dtype) {
  const int n = session_.size();
  const double bus_factor = 2.0 * (n - 1) / n;
  std::vector<std::string> header{"size", "count", "type", "redop"};
  std::map<std::int64_t, double> ratio_raw_by_size;
  hvd::bench::Table table({});
  hvd::bench::Table pieces({"size", "type", "raw MPI, one call (us)",
                            "raw MPI, " + hvd::bench::human_bytes(config_.raw_chunk_bytes) + " calls (us)",
                            "one call / pieces"});
  bool first = true;
  for (std::int64_t bytes = config_.min_bytes; bytes <= config_.max_bytes; bytes *= config_.step) {
    Buffer buffer(dtype, bytes / hvd::dtype_size(dtype));
    auto peers = peers_for(buffer, dtype);
    check(peers, buffer);
    auto seconds = measure(peers, dtype);
    const char* type_name = dtype == hvd::DataType::Float32 ? "float" : "half";
    for (std::size_t p = 0; p < peers.size(); ++p) {
      if (!peers[p].extra) continue;
      pieces.add({hvd::bench::human_bytes(bytes), type_name, fixed(seconds[0] * 1e6, 1), fixed(seconds[p] * 1e6, 1),
                  fixed(seconds[0] / seconds[p], 2) + "x"});
      peers.erase(peers.begin() + p);
      seconds.erase(seconds.begin() + p);
      break;
    }
    if (first) {
      for (const auto& p : peers)
        for (const char* c : {" time (us)", " algbw (GB/s)", " busbw (GB/s)"}) header.push_back(p.name + c);
      header.push_back("ours/raw");
      if (peers.size() > 2) header.push_back("ours/gloo");
      table = hvd::bench::Table(header);
      first = false;
    }
    std::vector<std::string> row{hvd::bench::human_bytes(bytes), std::to_string(buffer.count()), type_name, "sum"};
    for (double s : seconds) {
      const double algbw = bytes / s / 1e9;
      row.push_back(fixed(s * 1e6, 1));
      row.push_back(fixed(algbw, 3));
      row.push_back(fixed(algbw * bus_factor, 3));
    }
    row.push_back(fixed(seconds[0] / seconds[1], 2) + "x");
    if (seconds.size() > 2) row.push_back(fixed(seconds[2] / seconds[1], 2) + "x");
    ratio_raw_by_size[bytes] = seconds[0] / seconds[1];
    table.add(row);
    if (session_.rank() == 0) {
      std::printf("# %s %s done\n", hvd::dtype_name(dtype), hvd::bench::human_bytes(bytes).c_str());
      std::fflush(stdout);
    }
  }
  if (session_.rank() != 0) return;
  std::printf("\n### allreduce, %s, np=%d (ratios are bandwidth ratios: >1 means ours is faster)\n\n%s\n",
              hvd::dtype_name(dtype), n, table.str().c_str());
  if (config_.raw_chunk_bytes > 0 && config_.max_bytes > config_.raw_chunk_bytes)
    std::printf("Raw MPI_Allreduce of the same buffer in %s calls (what one large call costs Open MPI):\n\n%s\n",
                hvd::bench::human_bytes(config_.raw_chunk_bytes).c_str(), pieces.str().c_str());
  const std::int64_t target_bytes = 64LL << 20;
  if (n == 2 && dtype == hvd::DataType::Float32 && ratio_raw_by_size.count(target_bytes))
    hvd::bench::report_target("64 MB float32 allreduce at np=2: ours/raw MPI bandwidth", ratio_raw_by_size[target_bytes],
                              0.95, true, "x");
  std::fflush(stdout);
}

Config parse(const hvd::bench::Args& args) {
  Config c;
  c.min_bytes = args.get_int("--min-bytes", c.min_bytes);
  c.max_bytes = args.get_int("--max-bytes", c.max_bytes);
  c.step = static_cast<int>(args.get_int("--step", c.step));
  c.rounds = static_cast<int>(args.get_int("--rounds", c.rounds));
  c.warmup = static_cast<int>(args.get_int("--warmup", c.warmup));
  c.seconds = args.get_double("--seconds", c.seconds);
  c.raw_chunk_bytes = args.get_int("--raw-chunk-bytes", c.raw_chunk_bytes);
  c.gloo = !args.flag("--no-gloo");
  std::string dtypes = args.get("--dtypes", "float32,float16") + ",";
  for (std::size_t at = 0, comma; (comma = dtypes.find(',', at)) != std::string::npos; at = comma + 1) {
    const std::string d = dtypes.substr(at, comma - at);
    if (d == "float32") c.dtypes.push_back(hvd::DataType::Float32);
    else if (d == "float16") c.dtypes.push_back(hvd::DataType::Float16);
    else if (!d.empty()) throw std::invalid_argument("--dtypes: '" + d + "' is not float32 or float16");
  }
  args.reject_unknown();
  if (c.min_bytes < 4 || c.max_bytes < c.min_bytes || c.step < 2 || c.rounds < 1 || c.warmup < 1 ||
      c.raw_chunk_bytes < 0 || c.raw_chunk_bytes % 4)
    throw std::invalid_argument("need 4 <= --min-bytes <= --max-bytes, --step >= 2, --rounds >= 1, --warmup >= 1, "
                                "--raw-chunk-bytes a non-negative multiple of 4");
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  hvd::bench::Args args(argc, argv);
  if (args.flag("--help")) {
    std::puts("usage: mpirun -np N allreduce_benchmark [--min-bytes B] [--max-bytes B] [--step F] "
              "[--dtypes float32,float16] [--rounds R] [--warmup W] [--seconds S] [--no-gloo] "
              "[--raw-chunk-bytes B]");
    return 0;
  }
  hvd::bench::Session session(&argc, &argv);
  try {
    const Config config = parse(args);
    Runner runner(config, session);
    for (auto dtype : config.dtypes) runner.run_dtype(dtype);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "allreduce_benchmark (rank %d): %s\n", session.rank(), e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return 0;
}
