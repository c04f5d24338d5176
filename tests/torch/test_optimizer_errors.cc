// DistributedOptimizer misuse: every error a user can reach, its message, and that the
// gradients, parameters and runtime are still right afterwards.
#include "torch_test_util.h"

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
             Catch::Contains("op must be Average or Sum, got"));
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
             Catch::Contains("the inner optimizer is null"));
  auto other = make_mlp(4);
  CHECK_THAT(error_of([&] { ht::DistributedOptimizer(sgd(), other->named_parameters()); }),
             Catch::Contains("6 parameter(s) of the inner optimizer are not in named_parameters"));
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
  CHECK(opt.pending_allreduces() == (hvd::size() > 1 ? 1u : 0u));
  opt.step();
  CHECK(torch::allclose(tied, torch::full({3}, -(hvd::size() + 1) / 2.0f)));
}

TEST_CASE("zero_grad with allreduces pending, and an extra backward pass, keep the gradients intact",
          "[optimizer][errors]") {
  if (hvd::size() == 1) return;  // nothing is ever pending at size 1
  auto model = make_mlp(4);
  auto base = torch::randn({kBatch, 8});
  const auto expected = expected_gradients(model, base, 1);
  const auto x = base * (hvd::rank() + 1);
  ht::DistributedOptimizer opt(torch::optim::SGD(model->parameters(), 0.1), model->named_parameters());
  model->forward(x).sum().backward();
  CHECK_THAT(error_of([&] { opt.zero_grad(); }),
             Catch::Contains("zero_grad(): 6 gradient allreduce(s) started by backward are still pending"));
  // Refused before it is accumulated: the allreduces in flight on param.grad() are undisturbed.
  CHECK_THAT(error_of([&] { model->forward(x).sum().backward(); }),
             Catch::Contains("the gradient of 'fc3.bias' was computed 2 times before step(), but "
                             "backward_passes_per_step is 1"));
  const auto before = flat(*model);
  opt.step();
  CHECK(opt.pending_allreduces() == 0);
  check_gradients(model, expected);
  std::vector<torch::Tensor> grads;
  for (const auto& p : model->parameters()) grads.push_back(p.grad().reshape({-1}));
  CHECK(flat(*model).allclose(before - 0.1 * torch::cat(grads), 1e-6, 1e-6));
  opt.zero_grad();  // fine after step()
  model->forward(x).sum().backward();
  opt.step();
}

TEST_CASE("zero_grad after a partial accumulation is an error and loses nothing", "[optimizer][errors]") {
  if (hvd::size() == 1) return;  // no accumulation bookkeeping at size 1
  auto model = make_mlp(5);
  auto x = torch::randn({kBatch, 8});
  const auto expected = expected_gradients(model, x, 2);
  ht::DistributedOptimizerOptions o;
  o.backward_passes_per_step = 2;
  ht::DistributedOptimizer opt(torch::optim::SGD(model->parameters(), 0.1), model->named_parameters(), o);
  const auto mine = x * (hvd::rank() + 1);
  model->forward(mine).sum().backward();
  CHECK(opt.pending_allreduces() == 0);  // one pass of two: nothing sent yet
  CHECK_THAT(error_of([&] { opt.zero_grad(); }),
             Catch::Contains("zero_grad(): 6 gradient(s) hold a partial accumulation (fewer than "
                             "backward_passes_per_step = 2 backward passes)"));
  model->forward(mine).sum().backward();  // the second pass starts the allreduces of both passes
  CHECK(opt.pending_allreduces() == 6);
  opt.step();
  check_gradients(model, expected);
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
  (w * (rank + 1)).sum().backward();  // w's allreduce starts; it will succeed
  const std::string sparse = "DistributedOptimizer gradient of 'embedding.weight': sparse gradients are not supported";
  CHECK_THAT(error_of([&] { embedding(torch::tensor({1, 2}, torch::kLong)).sum().backward(); }),
             Catch::Contains(sparse));
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

TEST_CASE("two optimizers of the same name in flight together are told to set a name", "[optimizer][errors]") {
  const int rank = hvd::rank();
  if (hvd::size() == 1) return;  // nothing is in flight at size 1
  auto a = make_mlp(6);
  auto c = make_mlp(6);
  auto x = torch::randn({kBatch, 8});
  ht::DistributedOptimizer opt_a(torch::optim::SGD(a->parameters(), 0.1), a->named_parameters());
  ht::DistributedOptimizer opt_c(torch::optim::SGD(c->parameters(), 0.1), c->named_parameters());
  std::string error;
  if (rank == 0) {
    // a's allreduces stay in flight here: the other ranks start theirs only after the broadcast.
    a->forward(x).sum().backward();
    error = error_of([&] { c->forward(x).sum().backward(); });
  }
  ht::broadcast(torch::zeros({1}), {0, "same_name.release"});
  if (rank != 0) a->forward(x).sum().backward();
  opt_a.step();
  if (rank == 0) {
    CHECK_THAT(error, Catch::Contains("tensor 'DistributedOptimizer.fc3.bias' is already in flight"));
    CHECK_THAT(error, Catch::Contains("Another DistributedOptimizer named 'DistributedOptimizer' has this "
                                      "parameter's allreduce in flight: give each optimizer its own "
                                      "DistributedOptimizerOptions::name"));
  }
  auto mine = flat(*a);
  CHECK(torch::equal(ht::broadcast(mine, {0, "same_name.check"}), mine));
}
