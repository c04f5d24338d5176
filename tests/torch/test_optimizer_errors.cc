// DistributedOptimizer misuse: every error a user can reach, its message, and that the
// gradients, parameters and runtime are still right afterwards.
#include "torch_test_util.h"

#include <chrono>
#include <thread>

namespace ht = hvd::torch;
using hvd_test::error_of;
using hvd_test::flat;
using hvd_test::make_mlp;

namespace {

constexpr std::int64_t kBatch = 4;

// The mean over ranks r of the gradients of model(x * (r + 1)).sum() times `passes`, computed
// locally on a fresh copy of `model` (what a correct allreduce must produce).
std::vector<torch::Tensor> expected_gradients(const hvd_test::Mlp& model, const torch::Tensor& x, int passes) {
  auto copy = make_mlp(0);
  hvd_test::copy_parameters(*model, *copy);
  const int size = hvd::size();
  for (int r = 0; r < size; ++r) (copy->forward(x * (r + 1)).sum() * (static_cast<double>(passes) / size)).backward();
  std::vector<torch::Tensor> grads;
  for (const auto& p : copy->parameters()) grads.push_back(p.grad().clone());
  return grads;
}

void check_gradients(const hvd_test::Mlp& model, const std::vector<torch::Tensor>& expected) {
  auto params = model->parameters();
  REQUIRE(params.size() == expected.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    INFO("parameter " << i);
    REQUIRE(params[i].grad().defined());
    CHECK(params[i].grad().allclose(expected[i], 1e-5, 1e-6));
  }
}

// Identity forward; its backward pauses on rank 0 only.
struct RankZeroPause : torch::autograd::Function<RankZeroPause> {
  static torch::Tensor forward(torch::autograd::AutogradContext*, const torch::Tensor& x) { return x.clone(); }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*,
                                                 torch::autograd::variable_list grads) {
    if (hvd::rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return grads;
  }
};

}  // namespace

TEST_CASE("optimizer options and parameters are checked at construction", "[optimizer][errors]") {
  auto model = make_mlp(4);
  auto sgd = [&] { return torch::optim::SGD(model->parameters(), 0.1); };
  ht::DistributedOptimizerOptions o;
  o.backward_passes_per_step = 0;
  CHECK_THAT(error_of([&] { ht::DistributedOptimizer(sgd(), model->named_parameters(), o); }),
             Catch::Contains("backward_passes_per_step must be at least 1, got 0"));
  o = {};
  o.op = hvd::ReduceOp::Max;
  CHECK_THAT(error_of([&] { ht::DistributedOptimizer(sgd(), model->named_parameters(), o); }),
             Catch::Contains("op must be Average, Sum or Adasum, got Max"));
  o = {};
  o.op = hvd::ReduceOp::Sum;
  o.gradient_predivide_factor = 2.0;
  CHECK_THAT(error_of([&] { ht::DistributedOptimizer(sgd(), model->named_parameters(), o); }),
             Catch::Contains("gradient_predivide_factor 2.000000 needs op Average"));
  o = {};
  o.gradient_predivide_factor = 0.0;
  CHECK_THAT(error_of([&] { ht::DistributedOptimizer(sgd(), model->named_parameters(), o); }),
             Catch::Contains("gradient_predivide_factor must be positive"));
  o = {};
  o.name = "";
  CHECK_THAT(error_of([&] { ht::DistributedOptimizer(sgd(), model->named_parameters(), o); }),
             Catch::Contains("DistributedOptimizerOptions::name must not be empty"));
  CHECK_THAT(error_of([&] { ht::DistributedOptimizer(std::unique_ptr<torch::optim::Optimizer>(), ht::NamedTensors()); }),
             Catch::Contains("the wrapped optimizer is null"));
  auto other = make_mlp(4);
  CHECK_THAT(error_of([&] { ht::DistributedOptimizer(sgd(), other->named_parameters()); }),
             Catch::Contains("6 trainable parameter(s) of the optimizer, first parameter 0 of param group 0 (shape [16, 8]), are not in the named_parameters"));
  ht::NamedTensors with_undefined;
  with_undefined.insert("ghost", torch::Tensor());
  CHECK_THAT(error_of([&] { ht::DistributedOptimizer(sgd(), with_undefined); }),
             Catch::Contains("named parameter 'ghost' is undefined"));
}

TEST_CASE("a non-leaf parameter is rejected; duplicate names cannot be passed", "[optimizer][errors]") {
  auto w = torch::ones({3}, torch::requires_grad());
  auto doubled = w * 2;  // computed from w: not a leaf
  torch::optim::SGD sgd(std::vector<torch::Tensor>{w}, 0.1);
  sgd.param_groups()[0].params().push_back(doubled);  // torch's constructor would refuse it
  ht::NamedTensors named;
  named.insert("w", w);
  named.insert("doubled", doubled);
  CHECK_THAT(error_of([&] { ht::DistributedOptimizer(std::move(sgd), named); }),
             Catch::Contains("DistributedOptimizer: parameter 'doubled' is not a leaf tensor"));
  // A name given twice never reaches DistributedOptimizer: NamedTensors refuses it, naming it.
  CHECK_THROWS_WITH(named.insert("w", torch::ones({3})), Catch::Contains("'w' already defined"));
  // One tensor under two names (tied weights) is one gradient, reduced once.
  auto tied = torch::zeros({3}, torch::requires_grad());
  ht::NamedTensors aliases;
  aliases.insert("encoder.weight", tied);
  aliases.insert("decoder.weight", tied);
  ht::DistributedOptimizer opt(torch::optim::SGD({tied}, 1.0), aliases);
  (tied * (hvd::rank() + 1)).sum().backward();
  CHECK(tied.grad().allclose(torch::full({3}, (hvd::size() + 1) / 2.0f)));  // reduced once, not twice
  opt.step();
  CHECK(torch::allclose(tied, torch::full({3}, -(hvd::size() + 1) / 2.0f)));
}

TEST_CASE("backward returns reduced gradients; an extra pass before step() is reduced again",
          "[optimizer][zero_grad]") {
  if (hvd::size() == 1) return;  // nothing is reduced at size 1
  auto model = make_mlp(4);
  auto base = torch::randn({kBatch, 8});
  const auto x = base * (hvd::rank() + 1);
  ht::DistributedOptimizer opt(torch::optim::SGD(model->parameters(), 0.1), model->named_parameters());
  model->forward(x).sum().backward();
  CHECK(opt.pending_allreduces() == 0);
  check_gradients(model, expected_gradients(model, base, 1));  // already averaged when backward returns
  // A second pass (LibTorch's DCGAN steps its discriminator after a real and a fake pass)
  // accumulates onto the reduced gradient and is reduced again: the mean of both passes' sums.
  model->forward(x).sum().backward();
  check_gradients(model, expected_gradients(model, base, 2));
  const auto before = flat(*model);
  opt.step();
  std::vector<torch::Tensor> grads;
  for (const auto& p : model->parameters()) grads.push_back(p.grad().reshape({-1}));
  CHECK(flat(*model).allclose(before - 0.1 * torch::cat(grads), 1e-6, 1e-6));
}

TEST_CASE("zero_grad forgets a partial accumulation, whoever calls it", "[optimizer][zero_grad]") {
  if (hvd::size() == 1) return;  // no accumulation bookkeeping at size 1
  auto x = torch::randn({kBatch, 8});
  // Each way a LibTorch program zeroes: this optimizer, the base class through Optimizer&, the
  // module, and resetting the gradients to undefined.
  const std::vector<std::string> ways = {"DistributedOptimizer::zero_grad", "Optimizer&::zero_grad",
                                         "module->zero_grad", "zero_grad(set_to_none)"};
  for (const auto& way : ways) {
    INFO(way);
    auto model = make_mlp(5);
    const auto expected = expected_gradients(model, x, 2);
    ht::DistributedOptimizerOptions o;
    o.backward_passes_per_step = 2;
    o.name = "partial." + way;
    ht::DistributedOptimizer opt(torch::optim::SGD(model->parameters(), 0.1), model->named_parameters(), o);
    const auto mine = x * (hvd::rank() + 1);
    (model->forward(mine).sum() * 7).backward();  // one pass of two: nothing sent yet
    CHECK(opt.pending_allreduces() == 0);
    torch::optim::Optimizer& base = opt;
    if (way == ways[0]) opt.zero_grad();
    if (way == ways[1]) base.zero_grad();
    if (way == ways[2]) model->zero_grad();
    if (way == ways[3]) opt.zero_grad(/*set_to_none=*/true);
    // Two fresh passes: the forgotten one (times 7) must not be in the result.
    model->forward(mine).sum().backward();
    model->forward(mine).sum().backward();
    check_gradients(model, expected);
    opt.step();
  }
}

TEST_CASE("a GAN's generator pass through the discriminator is forgotten by the next zero_grad",
          "[optimizer][zero_grad]") {
  auto discriminator = make_mlp(9);
  auto generator = torch::nn::Linear(8, 8);
  ht::DistributedOptimizerOptions d_options;
  d_options.name = "gan.discriminator";
  ht::DistributedOptimizer d_opt(torch::optim::SGD(discriminator->parameters(), 0.1),
                                 discriminator->named_parameters(), d_options);
  ht::DistributedOptimizerOptions g_options;
  g_options.name = "gan.generator";
  ht::DistributedOptimizer g_opt(torch::optim::SGD(generator->parameters(), 0.1), generator->named_parameters(),
                                 g_options);
  ht::broadcast_parameters(*generator, 0);
  auto x = torch::randn({kBatch, 8});
  for (int step = 0; step < 3; ++step) {
    INFO("step " << step);
    discriminator->zero_grad();
    const auto expected = expected_gradients(discriminator, x, 1);
    discriminator->forward(x * (hvd::rank() + 1)).sum().backward();
    check_gradients(discriminator, expected);
    d_opt.step();
    generator->zero_grad();
    discriminator->forward(generator->forward(x)).sum().backward();  // also reaches D's parameters
    g_opt.step();
  }
  auto mine = flat(*discriminator);
  CHECK(torch::equal(ht::broadcast(mine, {0, "gan.check"}), mine));
}

TEST_CASE("a sparse gradient is refused, and a failed synchronize is retried, never skipped",
          "[optimizer][errors]") {
  const int size = hvd::size();
  const int rank = hvd::rank();
  if (size == 1) return;  // no reduction, so nothing to refuse at size 1
  torch::nn::Embedding embedding(torch::nn::EmbeddingOptions(10, 3).sparse(true));
  auto w = torch::zeros({3}, torch::requires_grad());
  ht::NamedTensors named;
  named.insert("embedding.weight", embedding->weight);
  named.insert("w", w);
  ht::DistributedOptimizer opt(torch::optim::SGD({embedding->weight, w}, 0.1), named);
  const std::string sparse = "DistributedOptimizer gradient of 'embedding.weight': sparse gradients are not supported";
  CHECK_THAT(error_of([&] { embedding(torch::tensor({1, 2}, torch::kLong)).sum().backward(); }),
             Catch::Contains(sparse));
  // w's reduction succeeds; the end of its backward pass still names the gradient that cannot.
  CHECK_THAT(error_of([&] { (w * (rank + 1)).sum().backward(); }), Catch::Contains(sparse));
  CHECK(w.grad().allclose(torch::full({3}, (size + 1) / 2.0f)));
  const auto embedding_before = embedding->weight.detach().clone();
  for (int attempt = 0; attempt < 2; ++attempt) {
    INFO("step() attempt " << attempt);
    CHECK_THAT(error_of([&] { opt.step(); }), Catch::Contains("synchronize(): " + sparse));
    // Not stepped, on an unreduced gradient or otherwise; w's reduced gradient is kept.
    CHECK(torch::equal(w, torch::zeros({3})));
    CHECK(torch::equal(embedding->weight, embedding_before));
    CHECK(w.grad().allclose(torch::full({3}, (size + 1) / 2.0f)));
  }
}

// Whether the first optimizer's allreduce of a name has completed when the second one's gradient
// of that name arrives differs between ranks; the refusal must not. Here c's gradients come first
// in the backward pass, then rank 0 pauses (long enough for c's allreduces to complete there), then
// a's. A rank that submitted a's names after all (and the others not) would keep allreduces that a
// later pass's gradients of those names are reduced with.
TEST_CASE("two optimizers of the same name are refused alike on every rank when the second comes late",
          "[optimizer][errors]") {
  if (hvd::size() == 1) return;  // nothing is in flight at size 1
  ht::DistributedOptimizerOptions o;
  o.overlap = ht::GradientOverlap::DuringBackward;
  auto a = make_mlp(6);
  auto c = make_mlp(6);
  auto x = torch::randn({kBatch, 8});
  ht::DistributedOptimizer opt_a(torch::optim::SGD(a->parameters(), 0.1), a->named_parameters(), o);
  ht::DistributedOptimizer opt_c(torch::optim::SGD(c->parameters(), 0.1), c->named_parameters(), o);
  // c on a's output (4 columns, twice): backward reaches all of c's parameters before the pause,
  // and a's after it.
  const std::string error = error_of([&] { c->forward(RankZeroPause::apply(a->forward(x)).repeat({1, 2})).sum().backward(); });
  CHECK_THAT(error, Catch::Contains("is already in flight"));
  CHECK_THAT(error, Catch::Contains("give each optimizer its own DistributedOptimizerOptions::name"));
  opt_a.zero_grad();
  opt_c.zero_grad();
  // Each optimizer's next pass reduces its own gradients: the mean over ranks r of the gradients
  // of model(x * (r + 1)).sum().
  for (hvd_test::Mlp* model : {&c, &a}) {
    auto& opt = model == &c ? opt_c : opt_a;
    const auto expected = expected_gradients(*model, x, 1);
    (*model)->forward(x * (hvd::rank() + 1)).sum().backward();
    opt.synchronize();
    check_gradients(*model, expected);
  }
}

TEST_CASE("two optimizers of the same name in flight together are told to set a name", "[optimizer][errors]") {
  if (hvd::size() == 1) return;  // nothing is in flight at size 1
  // Started (the runtime refuses the second) or held for the end of the pass (refused before
  // either is reduced: each optimizer's pass-end callback would otherwise reduce its own, in an
  // order the ranks need not share).
  const auto overlap = GENERATE(ht::GradientOverlap::DuringBackward, ht::GradientOverlap::AfterBackward);
  INFO("overlap " << static_cast<int>(overlap));
  ht::DistributedOptimizerOptions o;
  o.overlap = overlap;
  auto a = make_mlp(6);
  auto c = make_mlp(6);
  auto x = torch::randn({kBatch, 8});
  ht::DistributedOptimizer opt_a(torch::optim::SGD(a->parameters(), 0.1), a->named_parameters(), o);
  ht::DistributedOptimizer opt_c(torch::optim::SGD(c->parameters(), 0.1), c->named_parameters(), o);
  // One backward pass through both models: the same gradient names, in flight together.
  const std::string error = error_of([&] { (a->forward(x) + c->forward(x)).sum().backward(); });
  CHECK_THAT(error, Catch::Contains("is already in flight"));
  CHECK_THAT(error, Catch::Contains("Another DistributedOptimizer named 'DistributedOptimizer' has this "
                                    "parameter's allreduce in flight: give each optimizer its own "
                                    "DistributedOptimizerOptions::name"));
  // Both forget what the failed pass started; training then goes on normally.
  opt_a.zero_grad();
  opt_c.zero_grad();
  a->forward(x * (hvd::rank() + 1)).sum().backward();
  opt_a.step();
  auto mine = flat(*a);
  CHECK(torch::equal(ht::broadcast(mine, {0, "same_name.check"}), mine));
  // Nothing of the failed pass is left held or in flight: the second optimizer trains alone too.
  opt_c.zero_grad();
  c->forward(x * (hvd::rank() + 1)).sum().backward();
  opt_c.step();
  auto theirs = flat(*c);
  CHECK(torch::equal(ht::broadcast(theirs, {0, "same_name.check.c"}), theirs));
}
