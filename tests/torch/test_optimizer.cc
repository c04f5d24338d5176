// DistributedOptimizer: equivalence with single-process training on the union of the ranks'
// batches, gradient accumulation, fp16 compression, overlap with backward, missing gradients,
// reduce options and every error a user can reach.
#include <iostream>

#include "torch_test_util.h"

namespace ht = hvd::torch;
using hvd_test::make_mlp;

namespace {

constexpr int kSteps = 5;
constexpr std::int64_t kBatch = 4;  // per rank and backward pass
constexpr double kRoundoff = 1e-6;  // float32 round-off after kSteps momentum-SGD steps (measured: 3e-8)
constexpr double kFp16Tolerance = 5e-4;  // float16 gradients (measured: 5e-5 at np=2)

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

torch::Tensor flat(const torch::nn::Module& m) {
  std::vector<torch::Tensor> parts;
  for (const auto& p : m.parameters()) parts.push_back(p.detach().reshape({-1}));
  return torch::cat(parts);
}

// Trains one MLP with DistributedOptimizer (rank r takes rows [r*b, (r+1)*b) of each global
// micro-batch) and a local reference with plain SGD on the whole global micro-batch; returns the
// largest parameter difference. With fp16, also checks the reduced gradients are float16 values.
double train_against_reference(const ht::DistributedOptimizerOptions& options, const std::string& label) {
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
  auto sgd = torch::optim::SGDOptions(0.1).momentum(0.9);
  ht::DistributedOptimizer opt(torch::optim::SGD(dist->parameters(), sgd), dist->named_parameters(), options);
  torch::optim::SGD ref_opt(ref->parameters(), sgd);
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
  // Every rank holds exactly rank 0's parameters.
  auto mine = flat(*dist);
  CHECK(torch::equal(ht::broadcast(mine, {0, "equivalence.check." + label}), mine));
  const double diff = hvd_test::max_abs_diff(*dist, *ref);
  if (rank == 0)
    std::cout << "[torch equivalence] " << label << " np=" << size << ": max |param - reference| = " << diff
              << std::endl;
  return diff;
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

TEST_CASE("the first gradient's allreduce starts while backward is still running", "[optimizer][overlap]") {
  if (hvd::size() == 1) return;  // no communication at size 1
  auto model = make_mlp(3);
  auto inner = std::make_unique<torch::optim::SGD>(model->parameters(), 0.01);  // as in the README
  ht::DistributedOptimizer opt(std::move(inner), model->named_parameters());
  auto x = torch::randn({kBatch, 8}).requires_grad_(true);
  // x's gradient is the last one backward computes: fc1's backward runs only after fc3's and
  // fc2's parameters have their gradients.
  std::size_t started_before_input_grad = 0;
  x.register_hook([&](torch::Tensor g) {
    started_before_input_grad = opt.pending_allreduces();
    return g;
  });
  auto loss = model->forward(x).pow(2).mean();
  CHECK(opt.pending_allreduces() == 0);
  loss.backward();
  const std::size_t started_by_return = opt.pending_allreduces();
  CHECK(started_before_input_grad >= 4);  // fc3 and fc2: weight and bias each
  CHECK(started_by_return == model->parameters().size());
  opt.step();
  CHECK(opt.pending_allreduces() == 0);
}

TEST_CASE("a parameter without a gradient on one rank does not block the others", "[optimizer]") {
  const int size = hvd::size();
  const int rank = hvd::rank();
  if (size == 1) return;  // needs a rank with and a rank without the gradient
  const double sum_all = size * (size + 1) / 2.0;  // sum over ranks of (r+1)
  for (auto op : {hvd::ReduceOp::Average, hvd::ReduceOp::Sum}) {
    INFO("op " << hvd::reduce_op_name(op));
    TwoBranch model;
    ht::DistributedOptimizerOptions o;
    o.op = op;
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

TEST_CASE("DistributedOptimizer wraps Adam, AdamW, RMSprop and Adagrad", "[optimizer]") {
  auto model = make_mlp(21);
  auto params = model->parameters();
  std::vector<std::unique_ptr<torch::optim::Optimizer>> inner;
  inner.push_back(std::make_unique<torch::optim::Adam>(params, 0.01));
  inner.push_back(std::make_unique<torch::optim::AdamW>(params, 0.01));
  inner.push_back(std::make_unique<torch::optim::RMSprop>(params, 0.01));
  inner.push_back(std::make_unique<torch::optim::Adagrad>(params, 0.01));
  auto x = torch::randn({kBatch, 8}) + hvd::rank();  // rank-dependent data
  for (auto& o : inner) {
    ht::DistributedOptimizer opt(std::move(o), model->named_parameters());
    opt.zero_grad();
    model->forward(x).pow(2).mean().backward();
    opt.step();
  }
  auto mine = flat(*model);
  CHECK(torch::equal(ht::broadcast(mine, {0, "wrappers.check"}), mine));
}

TEST_CASE("optimizer misuse is reported with a clear error", "[optimizer][errors]") {
  const int size = hvd::size();
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
  CHECK_THAT(error_of([&] { ht::DistributedOptimizer(std::unique_ptr<torch::optim::Optimizer>(), ht::NamedTensors()); }),
             Catch::Contains("the inner optimizer is null"));
  auto other = make_mlp(4);
  CHECK_THAT(error_of([&] { ht::DistributedOptimizer(sgd(), other->named_parameters()); }),
             Catch::Contains("6 parameter(s) of the inner optimizer are not in named_parameters"));
  ht::NamedTensors with_undefined;
  with_undefined.insert("ghost", torch::Tensor());
  CHECK_THAT(error_of([&] { ht::DistributedOptimizer(sgd(), with_undefined); }),
             Catch::Contains("named parameter 'ghost' is undefined"));
  if (size == 1) return;  // the remaining errors concern pending allreduces

  auto x = torch::randn({kBatch, 8});
  ht::DistributedOptimizer opt(sgd(), model->named_parameters());
  model->forward(x).sum().backward();
  CHECK_THAT(error_of([&] { opt.zero_grad(); }),
             Catch::Contains("zero_grad(): 6 gradient allreduce(s) started by backward are still pending"));
  CHECK_THAT(error_of([&] { model->forward(x).sum().backward(); }),
             Catch::Contains("was computed 2 times before step(), but backward_passes_per_step is 1"));
  opt.step();  // the first pass's allreduces complete normally
  CHECK(opt.pending_allreduces() == 0);
  opt.zero_grad();
  model->forward(x).sum().backward();
  opt.step();
}
