// synthetic_benchmark: Horovod's synthetic benchmark in C++ with LibTorch. Trains a model on
// one fixed random batch and reports images per second per rank (mean and Horovod's interval,
// 1.96 standard deviations of the per-iteration rates) and in total. --comm picks how the
// gradients are exchanged:
//   hvd   hvd::torch::DistributedOptimizer with its default GradientOverlap::Auto (fused
//         allreduces start during backward, or at its end while the ranks fill the host's cores)
//   hvd-overlap  the same, overlap forced: every allreduce starts during backward
//   hvd-after    the same, no overlap: every allreduce starts when backward ends
//   gloo  plain SGD, then c10d ProcessGroupGloo allreduce of each gradient after backward, one
//         at a time, as LibTorch's distributed example does
//   none  plain SGD, no communication: the upper bound
//   sync  plain SGD and a barrier after each batch: no gradient traffic, but the ranks wait for
//         one another as any synchronous data-parallel step must (what that alone costs)
//   all   hvd, hvd-overlap, hvd-after, gloo, sync and none in one launch, iteration by iteration in turn, with ratios
//   LIST  a comma-separated list of the modes above, run the same way
// --host-heap keep (the default) keeps freed host memory in the process, so a step does not fault
// its activations in anew; --host-heap glibc leaves glibc's allocator as it is (host_heap.h).
//
//   mpirun -np 2 ./synthetic_benchmark [--model resnet20|resnet18|resnet50] [--batch-size 32]
//       [--num-warmup-batches 10] [--num-batches-per-iter 10] [--num-iters 10]
//       [--fp16-allreduce] [--no-cuda] [--threads N] [--comm hvd|hvd-overlap|hvd-after|gloo|none|sync|all|LIST]
//       [--host-heap keep|glibc]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include <horovodcpp/torch.h>

#include "bench_common.h"
#include "gloo_group.h"
#include "host_heap.h"
#include "models.h"

namespace {

using hvd::bench::fixed;
namespace ht = hvd::torch;

// Every --comm mode, in the order `all` runs them.
const std::vector<std::string> kModes = {"hvd", "hvd-overlap", "hvd-after", "gloo", "sync", "none"};

// Command-line settings, read once by main.
struct Config {
  std::string model = "resnet20";
  int batch_size = 32, warmup_batches = 10, batches_per_iter = 10, iters = 10, threads = 1;
  bool fp16 = false, cuda = true;
  std::vector<std::string> modes;
  std::string heap_mode = "keep";  // --host-heap
  std::string host_heap;           // what configure_host_heap() set, for the header
};

// One way of training: its own model copy (same seed, so the same weights) and optimizer.
struct Variant {
  std::string mode;
  hvd::bench::ModelSpec spec;
  std::function<void()> batch;  // one forward, backward and optimizer step
  std::vector<double> rates;    // images per second, one per timed iteration
  long page_faults = 0;         // taken by the training thread over the timed iterations
};

// Builds the variants, runs warm-up and the timed iterations, and prints the report. Main
// (training) thread; owns the variants, their optimizers and the Gloo group.
class Benchmark {
 public:
  Benchmark(const Config& config, hvd::bench::Session& session) : config_(config), session_(session) {
    device_ = config.cuda && torch::cuda::is_available() ? torch::Device(torch::kCUDA, hvd::local_rank())
                                                         : torch::Device(torch::kCPU);
    for (const auto& mode : config.modes) variants_.push_back(make_variant(mode));
  }
  void run();

 private:
  std::unique_ptr<Variant> make_variant(const std::string& mode);
  void batch_with_loss(Variant& v, const std::function<void(torch::Tensor)>& after_forward);
  void report();

  const Config& config_;
  hvd::bench::Session& session_;
  torch::Device device_{torch::kCPU};
  torch::Tensor data_, target_;
  std::shared_ptr<hvd::bench::GlooGroup> gloo_;
  std::vector<std::unique_ptr<ht::DistributedOptimizer>> hvd_optimizers_;
  std::vector<std::unique_ptr<torch::optim::SGD>> sgd_optimizers_;
  std::vector<std::unique_ptr<Variant>> variants_;
};

std::unique_ptr<Variant> Benchmark::make_variant(const std::string& mode) {
  torch::manual_seed(1234);  // every variant and rank starts from the same weights
  auto v = std::make_unique<Variant>();
  v->mode = mode;
  v->spec = hvd::bench::make_model(config_.model);
  v->spec.model->to(device_);
  if (!data_.defined()) {
    data_ = torch::randn({config_.batch_size, 3, v->spec.image_size, v->spec.image_size}, device_);
    target_ = torch::randint(0, v->spec.classes, {config_.batch_size}, torch::TensorOptions(device_).dtype(torch::kLong));
  }
  const auto sgd = torch::optim::SGDOptions(0.01).momentum(0.9);
  Variant* raw = v.get();
  if (mode == "hvd" || mode == "hvd-overlap" || mode == "hvd-after") {
    ht::broadcast_parameters(v->spec.model->named_parameters(), 0);
    ht::DistributedOptimizerOptions options;
    options.compression = config_.fp16 ? hvd::Compression::FP16 : hvd::Compression::None;
    options.name = "synthetic." + mode;
    if (mode == "hvd-overlap") options.overlap = ht::GradientOverlap::DuringBackward;
    if (mode == "hvd-after") options.overlap = ht::GradientOverlap::AfterBackward;
    hvd_optimizers_.push_back(std::make_unique<ht::DistributedOptimizer>(
        torch::optim::SGD(v->spec.model->parameters(), sgd), v->spec.model->named_parameters(), options));
    auto* opt = hvd_optimizers_.back().get();
    v->batch = [this, raw, opt] {
      opt->zero_grad();
      batch_with_loss(*raw, [](torch::Tensor loss) { loss.backward(); });
      opt->step();
    };
    return v;
  }
  sgd_optimizers_.push_back(std::make_unique<torch::optim::SGD>(v->spec.model->parameters(), sgd));
  auto* opt = sgd_optimizers_.back().get();
  if (mode == "none" || mode == "sync") {
    const bool sync = mode == "sync";
    v->batch = [this, raw, opt, sync] {
      opt->zero_grad();
      batch_with_loss(*raw, [](torch::Tensor loss) { loss.backward(); });
      if (sync) hvd::bench::quiet_barrier(session_.comm());
      opt->step();
    };
    return v;
  }
  if (!gloo_) gloo_ = std::make_shared<hvd::bench::GlooGroup>(session_.comm(), session_.all_on_one_node());
  const double size = session_.size();
  const bool fp16 = config_.fp16;
  v->batch = [this, raw, opt, size, fp16] {
    opt->zero_grad();
    batch_with_loss(*raw, [](torch::Tensor loss) { loss.backward(); });
    torch::NoGradGuard no_grad;
    for (auto& p : raw->spec.model->parameters()) {
      if (!p.grad().defined()) continue;
      at::Tensor grad = p.grad();
      at::Tensor wire = fp16 ? grad.to(torch::kHalf) : grad;
      gloo_->allreduce(wire);
      if (fp16) grad.copy_(wire);
      grad.div_(size);
    }
    opt->step();
  };
  return v;
}

void Benchmark::batch_with_loss(Variant& v, const std::function<void(torch::Tensor)>& after_forward) {
  auto output = v.spec.model->forward(data_);
  after_forward(torch::nn::functional::cross_entropy(output, target_));
}

void Benchmark::run() {
  const bool talk = session_.rank() == 0;
  if (talk) {
    std::int64_t params = 0, tensors = 0;
    for (const auto& p : variants_.front()->spec.model->parameters()) {
      params += p.numel();
      ++tensors;
    }
    std::printf("# Model: %s (%lld parameters in %lld tensors)\n# Batch size: %d\n# Number of %ss: %d (%d threads "
                "per rank)\n# Gradient allreduce: %s\n# Host heap: %s\n# Running warmup...\n",
                config_.model.c_str(), static_cast<long long>(params), static_cast<long long>(tensors),
                config_.batch_size, device_.is_cuda() ? "GPU" : "CPU", session_.size(), config_.threads,
                config_.fp16 ? "float16" : "float32", config_.host_heap.c_str());
    std::fflush(stdout);
  }
  for (auto& v : variants_)
    for (int i = 0; i < config_.warmup_batches; ++i) v->batch();
  if (talk) std::printf("# Running benchmark...\n");
  for (int iter = 0; iter < config_.iters; ++iter) {
    // In turn, so drift on a shared machine hits every variant alike, in a fresh order each
    // iteration: a rotation would leave every variant behind the same other one (sync always
    // after gloo, hvd after none), whose leftovers (caches, ranks out of step) it would inherit.
    // Seeded by the iteration, so every rank draws the same order.
    std::vector<std::size_t> order(variants_.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::mt19937 draw(static_cast<std::mt19937::result_type>(iter));
    std::shuffle(order.begin(), order.end(), draw);
    for (std::size_t k : order) {
      auto& v = variants_[k];
      hvd::bench::quiet_barrier(session_.comm());
      const long faults = hvd::bench::thread_page_faults();
      const double start = hvd::bench::now_seconds();
      for (int b = 0; b < config_.batches_per_iter; ++b) v->batch();
      if (device_.is_cuda()) torch::cuda::synchronize();
      v->page_faults += hvd::bench::thread_page_faults() - faults;
      const double rate = config_.batch_size * config_.batches_per_iter / (hvd::bench::now_seconds() - start);
      v->rates.push_back(rate);
      if (talk) std::printf("# Iter #%d (%s): %.1f img/sec per %s\n", iter, v->mode.c_str(), rate,
                            device_.is_cuda() ? "GPU" : "CPU");
      std::fflush(stdout);
    }
  }
  report();
}

void Benchmark::report() {
  const int n = session_.size();
  const char* unit = device_.is_cuda() ? "GPU" : "CPU";
  hvd::bench::Table table({"comm", "img/sec per rank (rank: mean ± 1.96 sd)", "total img/sec", "vs none", "hvd vs this",
                           "hvd vs this, paired median", "page faults per batch (rank: faults)"});
  std::vector<double> totals(variants_.size());
  std::vector<std::string> per_rank(variants_.size()), total_cells(variants_.size()), fault_cells(variants_.size());
  const double batches = static_cast<double>(config_.iters) * config_.batches_per_iter;
  for (std::size_t k = 0; k < variants_.size(); ++k) {
    const auto s = hvd::bench::summarize(variants_[k]->rates);
    const auto means = hvd::bench::gather_all(s.mean, session_.comm());
    const auto confs = hvd::bench::gather_all(1.96 * s.stddev, session_.comm());
    double conf_total = 0;  // the ranks' intervals added: a conservative interval of the sum
    for (int r = 0; r < n; ++r) {
      totals[k] += means[r];
      conf_total += confs[r];
      per_rank[k] += (r ? "; " : "") + std::to_string(r) + ": " + fixed(means[r], 1) + " ± " + fixed(confs[r], 1);
    }
    total_cells[k] = fixed(totals[k], 1) + " ± " + fixed(conf_total, 1);
    const auto faults = hvd::bench::gather_all(static_cast<double>(variants_[k]->page_faults) / batches, session_.comm());
    for (int r = 0; r < n; ++r) fault_cells[k] += (r ? "; " : "") + std::to_string(r) + ": " + fixed(faults[r], 0);
    if (session_.rank() == 0 && variants_.size() == 1)
      std::printf("Img/sec per %s: %.1f +-%.1f\nTotal img/sec on %d %s(s): %.1f +-%.1f\n", unit, means[0], confs[0], n,
                  unit, totals[k], conf_total);
  }
  if (session_.rank() != 0 || variants_.size() == 1) return;
  auto total_of = [&](const std::string& mode) {
    for (std::size_t k = 0; k < variants_.size(); ++k)
      if (variants_[k]->mode == mode) return totals[k];
    return -1.0;
  };
  const double none = total_of("none"), hvd_total = total_of("hvd"), gloo = total_of("gloo"),
               sync = total_of("sync");
  // hvd's iteration i against this variant's iteration i, which ran right beside it: the median
  // of those ratios follows the machine's speed as it drifts, which a ratio of means does not.
  const Variant* hvd_variant = nullptr;
  for (const auto& v : variants_)
    if (v->mode == "hvd") hvd_variant = v.get();
  auto paired = [&](const std::string& mode) {
    for (const auto& v : variants_) {
      if (v->mode != mode || hvd_variant == nullptr) continue;
      std::vector<double> ratios;
      for (std::size_t i = 0; i < v->rates.size(); ++i) ratios.push_back(hvd_variant->rates[i] / v->rates[i]);
      return hvd::bench::summarize(ratios).median;
    }
    return -1.0;
  };
  for (std::size_t k = 0; k < variants_.size(); ++k)
    table.add({variants_[k]->mode, per_rank[k], total_cells[k], none > 0 ? fixed(totals[k] / none, 3) + "x" : "",
               hvd_total > 0 ? fixed(hvd_total / totals[k], 3) + "x" : "",
               hvd_variant ? fixed(paired(variants_[k]->mode), 3) + "x" : "", fault_cells[k]});
  std::printf("\n### synthetic benchmark: %s, batch %d, np=%d, %d thread(s) per rank, %s gradients, %s, host heap: %s\n\n%s\n",
              config_.model.c_str(), config_.batch_size, n, config_.threads, config_.fp16 ? "float16" : "float32", unit,
              config_.heap_mode.c_str(), table.str().c_str());
  const std::string what = "training throughput at np=2 (" + config_.model + ", batch " +
                           std::to_string(config_.batch_size) + "): hvd / ";
  // The targets hold under the kept heap; under glibc's own the run shows what refaulting adds
  // (to every variant, unevenly), and its ratios are printed without a verdict.
  auto target = [&](const std::string& against, double measured, double goal) {
    if (config_.heap_mode == "keep")
      hvd::bench::report_target(what + against, measured, goal, true, "x");
    else
      std::printf("%s%s: %.3fx (no target under --host-heap %s)\n", what.c_str(), against.c_str(), measured,
                  config_.heap_mode.c_str());
  };
  if (n == 2 && none > 0 && hvd_total > 0) target("no communication", hvd_total / none, 0.95);
  if (n == 2 && gloo > 0 && hvd_total > 0) target("gloo after backward", hvd_total / gloo, 1.3);
  // sync pays every wait a synchronous step must; hvd may add only the gradient exchange on top.
  if (n == 2 && sync > 0 && hvd_total > 0) {
    target("sync (barrier after backward)", hvd_total / sync, 0.97);
    target("sync, median of per-iteration ratios", paired("sync"), 0.97);
  }
  if (sync > 0 && none > 0 && hvd_total > 0)
    std::printf("\nSynchronizing the ranks alone (sync) reaches %.3fx of none; hvd reaches %.3fx of sync.\n",
                sync / none, hvd_total / sync);
}

Config parse(const hvd::bench::Args& args) {
  Config c;
  c.model = args.get("--model", c.model);
  c.batch_size = static_cast<int>(args.get_int("--batch-size", c.batch_size));
  c.warmup_batches = static_cast<int>(args.get_int("--num-warmup-batches", c.warmup_batches));
  c.batches_per_iter = static_cast<int>(args.get_int("--num-batches-per-iter", c.batches_per_iter));
  c.iters = static_cast<int>(args.get_int("--num-iters", c.iters));
  c.fp16 = args.flag("--fp16-allreduce");
  c.cuda = !args.flag("--no-cuda");
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  c.threads = static_cast<int>(args.get_int("--threads", std::max(1, cores / std::max(1, hvd::local_size()))));
  const std::string comm = args.get("--comm", "hvd");
  c.heap_mode = args.get("--host-heap", c.heap_mode);
  args.reject_unknown();
  c.host_heap = hvd::bench::configure_host_heap(c.heap_mode);
  if (comm == "all") {
    c.modes = kModes;
  } else {  // one mode or a comma-separated list of them
    std::stringstream list(comm);
    for (std::string mode; std::getline(list, mode, ',');) {
      if (std::find(kModes.begin(), kModes.end(), mode) == kModes.end()) {
        std::string known;
        for (const auto& m : kModes) known += m + ", ";
        throw std::invalid_argument("--comm: '" + mode + "' is not " + known + "or all");
      }
      c.modes.push_back(mode);
    }
    if (c.modes.empty()) throw std::invalid_argument("--comm: empty list");
  }
  if (c.batch_size < 1 || c.warmup_batches < 0 || c.batches_per_iter < 1 || c.iters < 1 || c.threads < 1)
    throw std::invalid_argument("need --batch-size, --num-batches-per-iter, --num-iters, --threads >= 1 and "
                                "--num-warmup-batches >= 0");
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  hvd::bench::Args args(argc, argv);
  if (args.flag("--help")) {
    std::puts("usage: mpirun -np N synthetic_benchmark [--model resnet20|resnet18|resnet50] [--batch-size B] "
              "[--num-warmup-batches W] [--num-batches-per-iter K] [--num-iters I] [--fp16-allreduce] [--no-cuda] "
              "[--threads T] [--comm hvd|hvd-overlap|hvd-after|gloo|none|sync|all|LIST] [--host-heap keep|glibc]");
    return 0;
  }
  hvd::bench::Session session(&argc, &argv);
  try {
    const Config config = parse(args);
    torch::set_num_threads(config.threads);
    Benchmark benchmark(config, session);
    benchmark.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "synthetic_benchmark (rank %d): %s\n", session.rank(), e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return 0;
}
