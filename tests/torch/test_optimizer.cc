// DistributedOptimizer: equivalence with single-process training on the union of the ranks'
// batches (SGD, Adam, AdamW, RMSprop, Adagrad), gradient accumulation, fp16 compression, the
// predivide factor, overlap with backward (each GradientOverlap), missing gradients, optimizer
// names, and parameters frozen or unfrozen after wrapping. Errors are in test_optimizer_errors.cc.
#include <sched.h>

#include <functional>
#include <iostream>
#include <thread>
#include <utility>

#include "torch_test_util.h"

namespace ht = hvd::torch;
using hvd_test::flat;
using hvd_test::make_mlp;

namespace {

constexpr int kSteps = 5;
constexpr std::int64_t kBatch = 4;  // per rank and backward pass
constexpr double kRoundoff = 1e-6;  // float32 round-off after kSteps momentum-SGD steps (measured: 3e-8)
constexpr double kFp16Tolerance = 5e-4;  // float16 gradients (measured: 5e-5 at np=2)
// Adam, AdamW, RMSprop and Adagrad divide by running gradient norms, which amplifies the
// reduction's float32 round-off where a gradient is tiny (measured after kSteps steps: 2.1e-7,
// RMSprop, at np=2 and 4; Adam, AdamW and Adagrad 6e-8).
constexpr double kAdaptiveTolerance = 2e-6;

using MakeOptimizer = std::function<std::unique_ptr<torch::optim::Optimizer>(const std::vector<torch::Tensor>&)>;

std::unique_ptr<torch::optim::Optimizer> momentum_sgd(const std::vector<torch::Tensor>& params) {
  return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(0.1).momentum(0.9));
}

// Checks that every rank holds exactly rank 0's parameters (a broadcast named `check`); returns
// max |param - reference|, which rank 0 prints after `tag`.
double checked_difference(torch::nn::Module& dist, const torch::nn::Module& ref, const std::string& check,
                          const std::string& tag, const std::string& label) {
  auto mine = flat(dist);
  CHECK(torch::equal(ht::broadcast(mine, {0, check}), mine));
  const double diff = hvd_test::max_abs_diff(dist, ref);
  if (hvd::rank() == 0)
    std::cout << tag << " " << label << " np=" << hvd::size() << ": max |param - reference| = " << diff << std::endl;
  return diff;
}

// Trains one MLP with DistributedOptimizer (rank r takes rows [r*b, (r+1)*b) of each global
// micro-batch) and a local reference with the same plain optimizer on the whole global
// micro-batch; returns the largest parameter difference. With fp16, also checks the reduced
// gradients are float16 values.
double train_against_reference(const ht::DistributedOptimizerOptions& options, const std::string& label,
                               const MakeOptimizer& make_optimizer = momentum_sgd) {
  const int size = hvd::size();
  const int rank = hvd::rank();
  const int micro = options.backward_passes_per_step;
  auto dist = make_mlp(11);
  auto ref = make_mlp(12);
  ht::broadcast_parameters(dist->named_parameters(), 0);
  hvd_test::copy_parameters(*dist, *ref);
  torch::manual_seed(99);
  const std::int64_t rows = kSteps * micro * size * kBatch;
  auto x = torch::randn({rows, 8});
  auto y = torch::randn({rows, 4});
  ht::DistributedOptimizer opt(make_optimizer(dist->parameters()), dist->named_parameters(), options);
  auto ref_holder = make_optimizer(ref->parameters());
  torch::optim::Optimizer& ref_opt = *ref_holder;
  for (int k = 0; k < kSteps; ++k) {
    opt.zero_grad();
    ref_opt.zero_grad();
    for (int m = 0; m < micro; ++m) {
      const std::int64_t base = (k * micro + m) * size * kBatch;
      torch::mse_loss(dist->forward(x.narrow(0, base + rank * kBatch, kBatch)),
                      y.narrow(0, base + rank * kBatch, kBatch))
          .backward();
      torch::mse_loss(ref->forward(x.narrow(0, base, size * kBatch)), y.narrow(0, base, size * kBatch)).backward();
    }
    if (options.compression == hvd::Compression::FP16 && size > 1) {
      opt.synchronize();
      for (const auto& p : dist->parameters())
        CHECK(torch::equal(p.grad().to(torch::kHalf).to(torch::kFloat), p.grad()));
    }
    opt.step();
    ref_opt.step();
  }
  return checked_difference(*dist, *ref, "equivalence.check." + label, "[torch equivalence]", label);
}

// Two parameters: w takes part on every rank but 0, v on every rank; d loss/d w = c_r.
struct TwoBranchImpl : torch::nn::Module {
  TwoBranchImpl() {
    w = register_parameter("w", torch::zeros({3}));
    v = register_parameter("v", torch::zeros({3}));
  }
  torch::Tensor loss(int rank) {
    auto c = torch::full({3}, static_cast<float>(rank + 1));
    return rank == 0 ? (v * c).sum() : (w * c).sum() + (v * c).sum();
  }
  torch::Tensor w, v;
};
TORCH_MODULE(TwoBranch);

}  // namespace

TEST_CASE("SGD at np=N with batch b per rank equals one process with batch N*b", "[optimizer]") {
  CHECK(train_against_reference({}, "sgd") <= kRoundoff);
}

TEST_CASE("backward_passes_per_step=2 equals accumulating the union's gradients", "[optimizer]") {
  ht::DistributedOptimizerOptions o;
  o.backward_passes_per_step = 2;
  CHECK(train_against_reference(o, "bpps2") <= kRoundoff);
}

TEST_CASE("fp16 compression stays within float16 rounding of the reference", "[optimizer]") {
  ht::DistributedOptimizerOptions o;
  o.compression = hvd::Compression::FP16;
  CHECK(train_against_reference(o, "fp16") <= kFp16Tolerance);
}

TEST_CASE("gradient_predivide_factor leaves the average unchanged", "[optimizer]") {
  ht::DistributedOptimizerOptions o;
  o.gradient_predivide_factor = 4.0;
  CHECK(train_against_reference(o, "predivide4") <= kRoundoff);
}

// A float16 gradient of 40000 on every rank: the plain sum (40000 * size >= 80000) passes
// float16's largest value 65504 and becomes inf; predivided by 4 every partial sum stays below it
// (10000 * size, up to 6 ranks) and the result is exactly 40000.
TEST_CASE("gradient_predivide_factor keeps an fp16 sum in range", "[optimizer]") {
  const int size = hvd::size();
  if (size == 1 || size > 6) return;  // no reduction at size 1; the closed form holds up to 6 ranks
  for (double factor : {1.0, 4.0}) {
    INFO("gradient_predivide_factor " << factor);
    auto w = torch::zeros({4}, torch::requires_grad());
    ht::NamedTensors named;
    named.insert("w", w);
    ht::DistributedOptimizerOptions o;
    o.compression = hvd::Compression::FP16;
    o.gradient_predivide_factor = factor;
    ht::DistributedOptimizer opt(torch::optim::SGD({w}, 0.1), named, o);
    (w * 40000.0).sum().backward();
    opt.synchronize();
    if (factor == 1.0)
      CHECK(torch::all(torch::isinf(w.grad())).item<bool>());
    else
      CHECK(torch::equal(w.grad(), torch::full({4}, 40000.0f)));
  }
}

namespace {

// How many gradient allreduces had started when backward reached the input's gradient, the
// last one it computes (fc1's backward runs only after fc3's and fc2's parameters have their
// gradients); checks none is left in flight after backward.
std::size_t started_before_input_gradient(ht::GradientOverlap overlap) {
  auto model = make_mlp(3);
  ht::DistributedOptimizerOptions o;
  o.overlap = overlap;
  auto inner = std::make_unique<torch::optim::SGD>(model->parameters(), 0.01);  // as in the README
  ht::DistributedOptimizer opt(std::move(inner), model->named_parameters(), o);
  auto x = torch::randn({kBatch, 8}).requires_grad_(true);
  std::size_t started = 0;
  x.register_hook([&](torch::Tensor g) {
    started = opt.pending_allreduces();
    return g;
  });
  auto loss = model->forward(x).pow(2).mean();
  CHECK(opt.pending_allreduces() == 0);
  loss.backward();
  CHECK(opt.pending_allreduces() == 0);  // the end of backward waited for all of them
  for (const auto& p : model->parameters()) CHECK(p.grad().defined());
  opt.step();
  return started;
}

}  // namespace

TEST_CASE("overlap DuringBackward: the first allreduces start while backward is still running, and all end with it",
          "[optimizer][overlap]") {
  if (hvd::size() == 1) return;  // no communication at size 1
  CHECK(started_before_input_gradient(ht::GradientOverlap::DuringBackward) >= 4);  // fc3 and fc2: weight and bias
}

TEST_CASE("overlap AfterBackward: no allreduce starts before backward ends, all end with it", "[optimizer][overlap]") {
  if (hvd::size() == 1) return;
  CHECK(started_before_input_gradient(ht::GradientOverlap::AfterBackward) == 0);
}

// Auto holds host gradients to the end of backward exactly when this host's ranks fill the
// cores this process may use with LibTorch threads.
TEST_CASE("overlap Auto: host gradients overlap only while the ranks leave cores spare", "[optimizer][overlap]") {
  if (hvd::size() == 1) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(sched_getaffinity(0, sizeof(set), &set) == 0);
  const int usable = CPU_COUNT(&set);
  const int online = static_cast<int>(std::thread::hardware_concurrency());
  const int sharing = usable < online ? 1 : hvd::local_size();
  const int before = torch::get_num_threads();
  // Threads enough to fill every usable core even for one rank: always after backward.
  torch::set_num_threads(usable);
  CHECK(started_before_input_gradient(ht::GradientOverlap::Auto) == 0);
  // One thread per rank: overlap only when this host's ranks leave a core spare.
  torch::set_num_threads(1);
  const std::size_t started = started_before_input_gradient(ht::GradientOverlap::Auto);
  INFO(sharing << " rank(s) sharing " << usable << " usable core(s), one thread each");
  if (sharing < usable)
    CHECK(started >= 4);
  else
    CHECK(started == 0);
  torch::set_num_threads(before);
}

TEST_CASE("both overlaps equal one process on the union batch, with and without accumulation", "[optimizer][overlap]") {
  for (auto overlap : {ht::GradientOverlap::DuringBackward, ht::GradientOverlap::AfterBackward}) {
    for (int passes : {1, 2}) {
      const std::string label = std::string(overlap == ht::GradientOverlap::DuringBackward ? "during" : "after") +
                                ".bpps" + std::to_string(passes);
      INFO(label);
      ht::DistributedOptimizerOptions o;
      o.overlap = overlap;
      o.backward_passes_per_step = passes;
      CHECK(train_against_reference(o, "overlap." + label) <= kRoundoff);
    }
  }
}

TEST_CASE("a parameter without a gradient on one rank does not block the others", "[optimizer]") {
  const int size = hvd::size();
  const int rank = hvd::rank();
  if (size == 1) return;  // needs a rank with and a rank without the gradient
  const double sum_all = size * (size + 1) / 2.0;  // sum over ranks of (r+1)
  for (auto [op, overlap] : {std::pair{hvd::ReduceOp::Average, ht::GradientOverlap::DuringBackward},
                             std::pair{hvd::ReduceOp::Sum, ht::GradientOverlap::DuringBackward},
                             std::pair{hvd::ReduceOp::Average, ht::GradientOverlap::AfterBackward}}) {
    INFO("op " << hvd::reduce_op_name(op) << ", overlap " << static_cast<int>(overlap));
    TwoBranch model;
    ht::DistributedOptimizerOptions o;
    o.op = op;
    o.overlap = overlap;
    ht::DistributedOptimizer opt(torch::optim::SGD(model->parameters(), 1.0), model->named_parameters(), o);
    model->loss(rank).backward();
    opt.synchronize();
    const double scale = op == hvd::ReduceOp::Average ? 1.0 / size : 1.0;
    const double w_expected = (sum_all - 1.0) * scale;  // rank 0 contributes zeros
    REQUIRE(model->w.grad().defined());
    CHECK(model->w.grad().allclose(torch::full({3}, w_expected), 1e-6, 1e-6));
    CHECK(model->v.grad().allclose(torch::full({3}, sum_all * scale), 1e-6, 1e-6));
    opt.step();
    CHECK(model->v.allclose(-model->v.grad()));
  }
}

TEST_CASE("size 1 adds no communication: plain SGD results bit for bit", "[optimizer][size1]") {
  if (hvd::size() != 1) return;
  auto a = make_mlp(5);
  auto b = make_mlp(5);
  ht::DistributedOptimizer opt(torch::optim::SGD(a->parameters(), 0.1), a->named_parameters());
  torch::optim::SGD plain(b->parameters(), 0.1);
  auto x = torch::randn({8, 8});
  for (int k = 0; k < 3; ++k) {
    opt.zero_grad();
    plain.zero_grad();
    a->forward(x).sum().backward();
    CHECK(opt.pending_allreduces() == 0);
    b->forward(x).sum().backward();
    opt.step();
    plain.step();
  }
  CHECK(torch::equal(flat(*a), flat(*b)));
}

TEST_CASE("SGD, Adam, AdamW, RMSprop and Adagrad wrapped equal one process on the union batch", "[optimizer]") {
  using P = const std::vector<torch::Tensor>&;
  const std::vector<std::pair<std::string, MakeOptimizer>> kinds = {
      {"sgd", [](P p) { return std::make_unique<torch::optim::SGD>(p, 0.05); }},
      {"adam", [](P p) { return std::make_unique<torch::optim::Adam>(p, 0.01); }},
      {"adamw", [](P p) { return std::make_unique<torch::optim::AdamW>(p, 0.01); }},
      {"rmsprop", [](P p) { return std::make_unique<torch::optim::RMSprop>(p, 0.01); }},
      {"adagrad", [](P p) { return std::make_unique<torch::optim::Adagrad>(p, 0.01); }},
  };
  for (const auto& [label, make] : kinds) {
    INFO("inner optimizer " << label);
    const double diff = train_against_reference({}, "wrapped." + label, make);
    CHECK(diff <= (label == "sgd" ? kRoundoff : kAdaptiveTolerance));
  }
}

TEST_CASE("optimizers with their own names reduce together; ranks need not build the same number", "[optimizer]") {
  const int size = hvd::size();
  const int rank = hvd::rank();
  // Rank 0 alone builds (and drops) an extra optimizer: names must not depend on how many exist.
  if (rank == 0) {
    auto extra = make_mlp(7);
    ht::DistributedOptimizer unused(torch::optim::SGD(extra->parameters(), 0.1), extra->named_parameters());
  }
  auto a = make_mlp(8);
  auto b = make_mlp(8);
  auto reference = make_mlp(8);
  auto x = torch::randn({kBatch, 8});
  ht::DistributedOptimizer opt_a(torch::optim::SGD(a->parameters(), 0.1), a->named_parameters());
  ht::DistributedOptimizerOptions named_b;
  named_b.name = "second";
  ht::DistributedOptimizer opt_b(torch::optim::SGD(b->parameters(), 0.1), b->named_parameters(), named_b);
  // One pass through both: the same parameter names, in flight together under their prefixes.
  (a->forward(x * (rank + 1)).sum() + b->forward(x * (rank + 1)).sum()).backward();
  CHECK(opt_a.pending_allreduces() + opt_b.pending_allreduces() == 0);
  opt_a.step();
  opt_b.step();
  // Reference: the mean over ranks of the local gradients, one plain SGD step.
  for (int r = 0; r < size; ++r) (reference->forward(x * (r + 1)).sum() / size).backward();
  torch::optim::SGD(reference->parameters(), 0.1).step();
  CHECK(hvd_test::max_abs_diff(*a, *reference) <= kRoundoff);
  CHECK(hvd_test::max_abs_diff(*b, *reference) <= kRoundoff);
}

TEST_CASE("CUDA gradients are reduced as backward produces them", "[optimizer][cuda]") {
  if (!hvd_test::cuda_case_runs()) {
    SUCCEED("no CUDA device here");
    return;
  }
  const int size = hvd::size();
  const int rank = hvd::rank();
  torch::Device device(torch::kCUDA, hvd::local_rank() % static_cast<int>(torch::cuda::device_count()));
  auto model = make_mlp(13);
  auto reference = make_mlp(13);
  model->to(device);
  auto x = torch::randn({kBatch, 8});
  // Two passes per step, after a pass that a zero_grad() through the base class forgets: this
  // leans on what LibTorch's autograd does with the accumulators' hooks (a pre-hook before each
  // accumulation, a post-hook after it, the pass-end callback when backward ends), which the GPU
  // machine's newer PyTorch is only known to keep from reading its source.
  ht::DistributedOptimizerOptions options;
  options.backward_passes_per_step = 2;
  ht::DistributedOptimizer opt(torch::optim::SGD(model->parameters(), 0.1), model->named_parameters(), options);
  const auto mine = (x * (rank + 1)).to(device);  // gradients come from CUDA kernels
  (model->forward(mine).sum() * 7).backward();
  static_cast<torch::optim::Optimizer&>(opt).zero_grad();
  model->forward(mine).sum().backward();
  model->forward(mine).sum().backward();
  // Reduced when the second backward returns: nothing in flight, the mean over ranks in place.
  CHECK(opt.pending_allreduces() == 0);
  for (int r = 0; r < size; ++r) (reference->forward(x * (r + 1)).sum() * 2 / size).backward();
  const auto grads = model->parameters();
  const auto expected = reference->parameters();
  for (std::size_t i = 0; i < grads.size(); ++i) {
    REQUIRE(grads[i].grad().defined());
    CHECK(grads[i].grad().cpu().allclose(expected[i].grad(), 1e-5, 1e-5));
  }
  opt.step();
  torch::optim::SGD(reference->parameters(), 0.1).step();
  CHECK(flat(*model).cpu().allclose(flat(*reference), 1e-5, 1e-5));  // GPU against CPU arithmetic
}

TEST_CASE("LBFGS with a closure equals one process on the union batch", "[optimizer][closure]") {
  const int size = hvd::size();
  const int rank = hvd::rank();
  auto dist = make_mlp(21);
  auto ref = make_mlp(21);
  torch::manual_seed(5);
  const auto x = torch::randn({size * kBatch, 8});
  const auto y = torch::randn({size * kBatch, 4});
  ht::DistributedOptimizerOptions o;
  o.name = "lbfgs";
  ht::DistributedOptimizer opt(torch::optim::LBFGS(dist->parameters(), torch::optim::LBFGSOptions(0.5).max_iter(4)),
                               dist->named_parameters(), o);
  torch::optim::LBFGS ref_opt(ref->parameters(), torch::optim::LBFGSOptions(0.5).max_iter(4));
  // The closures zero through Optimizer&, as a function written for any optimizer would.
  auto closure_for = [](torch::optim::Optimizer& optimizer, hvd_test::Mlp& model, torch::Tensor in, torch::Tensor out) {
    return [&optimizer, &model, in, out] {
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(in), out);
      loss.backward();
      return loss;
    };
  };
  for (int k = 0; k < 3; ++k) {
    opt.step(closure_for(opt, dist, x.narrow(0, rank * kBatch, kBatch), y.narrow(0, rank * kBatch, kBatch)));
    ref_opt.step(closure_for(ref_opt, ref, x, y));
  }
  CHECK(hvd_test::max_abs_diff(*dist, *ref) <= 1e-5);
  CHECK(!opt.state().empty());  // LBFGS keeps its history in the state this object holds
}

TEST_CASE("a train function taking torch::optim::Optimizer& sees the wrapped optimizer's groups and state",
          "[optimizer][interface]") {
  auto model = make_mlp(31);
  ht::DistributedOptimizerOptions o;
  o.name = "interface";
  ht::DistributedOptimizer opt(torch::optim::Adam(model->parameters(), torch::optim::AdamOptions(0.01)),
                               model->named_parameters(), o);
  torch::optim::Optimizer& base = opt;
  REQUIRE(base.param_groups().size() == 1);
  CHECK(base.param_groups()[0].params().size() == model->parameters().size());
  CHECK(base.state().empty());
  static_cast<torch::optim::AdamOptions&>(base.param_groups()[0].options()).lr(0.0);  // a scheduler's write
  const auto before = flat(*model);
  base.zero_grad();
  model->forward(torch::randn({kBatch, 8})).sum().backward();
  base.step();
  CHECK(torch::equal(flat(*model), before));  // the wrapped Adam stepped with learning rate 0
  CHECK(base.state().size() == model->parameters().size());  // and its state landed here
  // The archive is the wrapped optimizer's: it loads into a plain Adam.
  std::stringstream archive;
  torch::save(opt, archive);
  torch::optim::Adam plain(model->parameters(), 0.01);
  torch::load(plain, archive);
  for (const auto& p : model->parameters()) {
    auto* state = hvd_test::param_state<torch::optim::AdamParamState>(plain, p);
    REQUIRE(state != nullptr);
    CHECK(state->step() == 1);
  }
}

TEST_CASE("a parameter given a new shape with set_data is reduced in its new shape", "[optimizer]") {
  // Network surgery between steps (a layer grown in place): the parameter keeps its identity and
  // name, its hooks move to a fresh gradient accumulator at zero_grad() (Note [A parameter's data
  // replaced]), and the next reduction carries the gradient's new shape on every rank.
  const int size = hvd::size();
  const double rank_factor = hvd::rank() + 1.0, mean_factor = (size + 1) / 2.0;  // mean over ranks of (r+1)
  torch::manual_seed(0);
  torch::nn::Linear layer(4, 3);
  ht::DistributedOptimizer opt(torch::optim::SGD(layer->parameters(), 0.5), layer->named_parameters());
  const auto x = torch::ones({2, 4});
  auto train_step = [&] {
    opt.zero_grad();
    layer->forward(x * rank_factor).sum().backward();
    opt.synchronize();
  };
  train_step();
  CHECK(layer->weight.grad().allclose(torch::full({3, 4}, 2 * mean_factor)));
  opt.step();
  {
    torch::NoGradGuard no_grad;
    layer->weight.set_data(torch::ones({5, 4}));
    layer->bias.set_data(torch::zeros({5}));
  }
  // As plain LibTorch needs: zero_grad() keeps the old gradients (zeroed, in the old shape), and
  // backward would accumulate into them.
  for (auto& p : layer->parameters()) p.mutable_grad().reset();
  layer->options.out_features(5);
  train_step();
  // d(sum)/dW[i][j] = sum over the batch of x * (r + 1): 2 (r + 1), averaged over the ranks.
  REQUIRE(layer->weight.grad().sizes() == torch::IntArrayRef({5, 4}));
  CHECK(layer->weight.grad().allclose(torch::full({5, 4}, 2 * mean_factor)));
  CHECK(layer->bias.grad().allclose(torch::full({5}, 2.0)));
  opt.step();
  CHECK(layer->weight.allclose(torch::full({5, 4}, 1 - 0.5 * 2 * mean_factor)));
  CHECK(layer->bias.allclose(torch::full({5}, -0.5 * 2.0)));
}

TEST_CASE("a module moved to another dtype after wrapping still reduces while backward runs", "[optimizer]") {
  // module->to() replaces each parameter's data (set_data), and autograd then builds a new
  // gradient accumulator without the optimizer's hooks (Note [A parameter's data replaced]).
  const int size = hvd::size();
  if (size == 1) return;  // no hooks at size 1
  const double mean_factor = (size + 1) / 2.0;
  torch::manual_seed(0);
  torch::nn::Linear layer(4, 3);
  ht::DistributedOptimizer opt(torch::optim::SGD(layer->parameters(), 0.5), layer->named_parameters());
  layer->to(torch::kDouble);
  const auto x = torch::ones({2, 4}, torch::kDouble);
  opt.zero_grad();
  layer->forward(x * (hvd::rank() + 1.0)).sum().backward();
  // Reduced by the hooks (the end of backward waits for them), not left for step().
  CHECK(opt.pending_allreduces() == 0);
  CHECK(layer->weight.grad().allclose(torch::full({3, 4}, 2 * mean_factor, torch::kDouble)));
  CHECK(layer->bias.grad().allclose(torch::full({3}, 2.0, torch::kDouble)));
  opt.step();
  CHECK(layer->bias.grad().dtype() == torch::kDouble);
}

namespace {

std::unique_ptr<torch::optim::Optimizer> momentum_sgd_decay(const std::vector<torch::Tensor>& params) {
  return std::make_unique<torch::optim::SGD>(params,
                                             torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(0.05));
}

// The parameters of `m` whose names start with `prefix` (one layer).
std::vector<torch::Tensor> layer_parameters(const torch::nn::Module& m, const std::string& prefix) {
  std::vector<torch::Tensor> out;
  for (const auto& item : m.named_parameters())
    if (item.key().rfind(prefix, 0) == 0) out.push_back(item.value());
  return out;
}

// A copy of the values of `params`, flattened into one tensor.
torch::Tensor layer_values(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> parts;
  for (const auto& p : params) parts.push_back(p.detach().reshape({-1}).clone());
  return torch::cat(parts);
}

// Trains as train_against_reference does (momentum SGD with weight decay), with `layer` of both
// models requiring grad in step k only where trains(k), the same on every rank; the optimizer is
// built with the layer as trains(0) leaves it. Gradients are reset (not zeroed) before each
// step, so the plain optimizer skips a frozen layer: LibTorch 1.x's zero_grad() zeroes them, and
// momentum and weight decay would move it on a zero gradient. Checks the layer stays exactly in
// place in every frozen step and takes no part in its reductions, moves in the trained ones, and
// that every rank holds rank 0's parameters; returns max |param - reference|.
double toggled_against_reference(ht::GradientOverlap overlap, const std::string& layer,
                                 const std::function<bool(int)>& trains, const std::string& label) {
  const int size = hvd::size();
  const int rank = hvd::rank();
  auto dist = make_mlp(41);
  auto ref = make_mlp(42);
  ht::broadcast_parameters(dist->named_parameters(), 0);
  hvd_test::copy_parameters(*dist, *ref);
  const auto dist_layer = layer_parameters(*dist, layer + ".");
  const auto ref_layer = layer_parameters(*ref, layer + ".");
  REQUIRE(dist_layer.size() == 2);  // weight and bias
  auto set_trainable = [&](bool on) {
    for (const auto& p : dist_layer) p.requires_grad_(on);
    for (const auto& p : ref_layer) p.requires_grad_(on);
  };
  set_trainable(trains(0));
  torch::manual_seed(98);
  auto x = torch::randn({kSteps * size * kBatch, 8});
  auto y = torch::randn({kSteps * size * kBatch, 4});
  ht::DistributedOptimizerOptions options;
  options.overlap = overlap;
  options.name = "toggled." + label;
  ht::DistributedOptimizer opt(momentum_sgd_decay(dist->parameters()), dist->named_parameters(), options);
  auto ref_opt = momentum_sgd_decay(ref->parameters());
  hvd_test::FrozenSteps frozen_steps(options.name + "." + layer + ".", options.name + ".fc3.weight",
                                      "requires_grad_timeline");
  for (int k = 0; k < kSteps; ++k) {
    const bool on = trains(k);
    INFO("step " << k << ", " << layer << (on ? " trains" : " frozen"));
    if (on)
      frozen_steps.end();
    else
      frozen_steps.begin();
    set_trainable(on);
    opt.zero_grad(true);
    for (const auto& p : ref->parameters()) p.mutable_grad().reset();
    const auto before = layer_values(dist_layer);
    const std::int64_t base = k * size * kBatch;
    torch::mse_loss(dist->forward(x.narrow(0, base + rank * kBatch, kBatch)), y.narrow(0, base + rank * kBatch, kBatch))
        .backward();
    torch::mse_loss(ref->forward(x.narrow(0, base, size * kBatch)), y.narrow(0, base, size * kBatch)).backward();
    opt.step();
    ref_opt->step();
    if (on)
      CHECK(!torch::equal(layer_values(dist_layer), before));
    else
      CHECK(torch::equal(layer_values(dist_layer), before));
  }
  frozen_steps.end();
  return checked_difference(*dist, *ref, "toggled.check." + label, "[torch requires_grad]", label);
}

const char* overlap_label(ht::GradientOverlap overlap) {
  return overlap == ht::GradientOverlap::DuringBackward ? "during" : "after";
}

}  // namespace

// Fine-tuning: the first layer (the "backbone") frozen when the optimizer is built, unfrozen on
// every rank after two steps; its gradients must be averaged from the step it first has them.
TEST_CASE("a parameter unfrozen after wrapping is reduced from the next step on", "[optimizer][requires_grad]") {
  for (auto overlap : {ht::GradientOverlap::DuringBackward, ht::GradientOverlap::AfterBackward}) {
    INFO("overlap " << overlap_label(overlap));
    const double diff = toggled_against_reference(
        overlap, "fc1", [](int k) { return k >= 2; }, std::string("unfrozen.") + overlap_label(overlap));
    CHECK(diff <= kRoundoff);
  }
}

// A middle layer frozen on every rank after two steps (backward still runs through it): with
// its gradient reset it must not move, though its momentum and weight decay would move it on a
// zero gradient; the rest keeps matching the union batch.
TEST_CASE("a parameter frozen after wrapping keeps its value", "[optimizer][requires_grad]") {
  for (auto overlap : {ht::GradientOverlap::DuringBackward, ht::GradientOverlap::AfterBackward}) {
    INFO("overlap " << overlap_label(overlap));
    const double diff = toggled_against_reference(
        overlap, "fc2", [](int k) { return k < 2; }, std::string("frozen.") + overlap_label(overlap));
    CHECK(diff <= kRoundoff);
  }
}
