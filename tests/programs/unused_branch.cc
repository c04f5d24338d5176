// A model with branches that do not always run: an auxiliary head the forward never calls
// (left over from pretraining), and a branch taken only on even steps. Their parameters get no
// gradient in some or all steps; DistributedOptimizer must neither wait for them forever nor
// let the ranks disagree.
//
// Checks: identical parameters on every rank; equal to one process on the union batches; the
// never-used head is unchanged.
#include "program_support.h"

namespace ht = hvd::torch;

namespace {

constexpr std::int64_t kBatch = 8;
constexpr int kSteps = 20;

struct NetImpl : torch::nn::Module {
  NetImpl()
      : trunk(register_module("trunk", torch::nn::Linear(3, 8))),
        even(register_module("even", torch::nn::Linear(8, 8))),
        head(register_module("head", torch::nn::Linear(8, 1))),
        auxiliary(register_module("auxiliary", torch::nn::Linear(8, 4))) {}
  torch::Tensor forward(torch::Tensor x, bool take_even_branch) {
    x = torch::tanh(trunk(x));
    if (take_even_branch) x = torch::tanh(even(x));
    return head(x);
  }
  torch::nn::Linear trunk, even, head, auxiliary;
};
TORCH_MODULE(Net);

Net make_net() {
  torch::manual_seed(21);
  return Net();
}

void train(Net& model, torch::optim::Optimizer& optimizer, const programs::Shard& shard) {
  for (int step = 0; step < kSteps; ++step) {
    torch::manual_seed(300 + step);
    const auto x = torch::randn({kBatch * shard.world, 3});
    const auto y = x.sum(1, true).sin();
    optimizer.zero_grad();
    auto loss = torch::mse_loss(model->forward(shard.rows(x), step % 2 == 0), shard.rows(y));
    loss.backward();
    optimizer.step();
  }
}

}  // namespace

int main() {
  hvd::init();                                                                       // HVD
  programs::Checks checks("unused_branch");
  torch::set_default_dtype(caffe2::TypeMeta::Make<double>());
  auto model = make_net();
  const auto auxiliary_before = model->auxiliary->weight.clone();
  ht::DistributedOptimizer optimizer(                                                // HVD
      torch::optim::SGD(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9)),
      model->named_parameters());                                                    // HVD
  ht::broadcast_parameters(*model, 0);                                               // HVD
  train(model, optimizer, programs::Shard::mine());

  auto reference = make_net();
  torch::optim::SGD ref_optimizer(reference->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  train(reference, ref_optimizer, programs::Shard::all());

  checks.expect(model->auxiliary->weight.equal(auxiliary_before), "the never-used auxiliary head changed");
  checks.identical_across_ranks(model->named_parameters(), "parameter");
  checks.close(model->named_parameters(), reference->named_parameters(), 1e-9, "model vs one process");
  const int status = checks.finish();
  hvd::shutdown();                                                                   // HVD
  return status;
}
