// Transfer learning: a "pretrained" backbone is frozen (requires_grad false) while a new head
// trains; then the backbone is unfrozen and added to the optimizer with add_param_group at a
// lower learning rate, as fine-tuning recipes do. The optimizer is built over the head only,
// with the model's named_parameters() for names.
//
// Checks: identical parameters on every rank; equal to one process on the union batches; the
// backbone did not move while frozen.
#include "program_support.h"

namespace ht = hvd::torch;

namespace {

constexpr std::int64_t kBatch = 8;
constexpr int kFrozenSteps = 15, kTunedSteps = 15;

struct ClassifierImpl : torch::nn::Module {
  ClassifierImpl()
      : backbone(register_module("backbone", torch::nn::Sequential(torch::nn::Linear(6, 12), torch::nn::Tanh(),
                                                                    torch::nn::Linear(12, 12), torch::nn::Tanh()))),
        head(register_module("head", torch::nn::Linear(12, 3))) {}
  torch::Tensor forward(torch::Tensor x) { return head->forward(backbone->forward(x)); }
  torch::nn::Sequential backbone;
  torch::nn::Linear head;
};
TORCH_MODULE(Classifier);

Classifier make_model() {
  torch::manual_seed(3);
  Classifier model;
  for (auto& p : model->backbone->parameters()) p.requires_grad_(false);  // pretrained: frozen
  return model;
}

void train_steps(Classifier& model, torch::optim::Optimizer& optimizer, int first, int steps,
                 const programs::Shard& shard) {
  model->train();
  for (int step = first; step < first + steps; ++step) {
    torch::manual_seed(500 + step);
    const auto x = torch::randn({kBatch * shard.world, 6});
    const auto y = torch::randint(0, 3, {kBatch * shard.world});
    optimizer.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(model->forward(shard.rows(x)), shard.rows(y));
    loss.backward();
    optimizer.step();
  }
}

// Fine-tuning: unfreeze the backbone and give it its own, smaller learning rate.
void unfreeze(Classifier& model, torch::optim::Optimizer& optimizer) {
  auto backbone = model->backbone->parameters();
  for (auto& p : backbone) p.requires_grad_(true);
  optimizer.add_param_group(torch::optim::OptimizerParamGroup(
      backbone, std::make_unique<torch::optim::SGDOptions>(torch::optim::SGDOptions(0.01).momentum(0.9))));
}

}  // namespace

int main() {
  hvd::init();                                                             // HVD
  programs::Checks checks("transfer");
  torch::set_default_dtype(caffe2::TypeMeta::Make<double>());
  auto model = make_model();
  const auto pretrained = model->backbone->parameters()[0].clone();
  ht::DistributedOptimizer optimizer(                                      // HVD
      torch::optim::SGD(model->head->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9)),
      model->named_parameters());                                          // HVD
  ht::broadcast_parameters(*model, 0);                                     // HVD
  train_steps(model, optimizer, 0, kFrozenSteps, programs::Shard::mine());
  checks.expect(model->backbone->parameters()[0].equal(pretrained), "the frozen backbone moved");
  unfreeze(model, optimizer);
  train_steps(model, optimizer, kFrozenSteps, kTunedSteps, programs::Shard::mine());
  checks.expect(!model->backbone->parameters()[0].equal(pretrained), "the unfrozen backbone did not train");

  auto reference = make_model();
  torch::optim::SGD ref_optimizer(reference->head->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  train_steps(reference, ref_optimizer, 0, kFrozenSteps, programs::Shard::all());
  unfreeze(reference, ref_optimizer);
  train_steps(reference, ref_optimizer, kFrozenSteps, kTunedSteps, programs::Shard::all());

  checks.identical_across_ranks(model->named_parameters(), "parameter");
  checks.close(model->named_parameters(), reference->named_parameters(), 1e-9, "model vs one process");
  const int status = checks.finish();
  hvd::shutdown();                                                         // HVD
  return status;
}
