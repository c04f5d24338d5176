// The loop of a LibTorch regression example with the two things every real recipe adds: an LR
// scheduler (torch::optim::StepLR, which takes an Optimizer&) and gradient clipping between
// backward() and step(). The training function takes torch::optim::Optimizer&.
//
// Checks: identical parameters on every rank; equal to one process on the union batches (the
// clipping sees the averaged gradient, as it would in one process, and the wrapped optimizer
// stepped with the learning rates the scheduler set); the scheduler's last rate is the same.
#include "program_support.h"

namespace ht = hvd::torch;

namespace {

constexpr std::int64_t kBatch = 8;
constexpr int kEpochs = 4, kStepsPerEpoch = 10;

torch::nn::Sequential make_model() {
  torch::manual_seed(11);
  return torch::nn::Sequential(torch::nn::Linear(5, 20), torch::nn::ReLU(), torch::nn::Linear(20, 1));
}

double train(torch::nn::Sequential& model, torch::optim::Optimizer& optimizer, const programs::Shard& shard) {
  torch::optim::StepLR scheduler(optimizer, /*step_size=*/1, /*gamma=*/0.5);
  const auto w = torch::linspace(-1, 1, 5).unsqueeze(1);
  double loss_value = 0;
  for (int epoch = 0; epoch < kEpochs; ++epoch) {
    for (int step = 0; step < kStepsPerEpoch; ++step) {
      torch::manual_seed(100 * epoch + step);
      const auto x = torch::randn({kBatch * shard.world, 5}) * 3;
      const auto y = x.mm(w) + 0.1 * torch::randn({kBatch * shard.world, 1});
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(shard.rows(x)), shard.rows(y));
      loss.backward();
      torch::nn::utils::clip_grad_norm_(model->parameters(), /*max_norm=*/0.5);
      optimizer.step();
      loss_value = loss.item<double>();
    }
    scheduler.step();
  }
  return loss_value;
}

double learning_rate(torch::optim::Optimizer& optimizer) {
  return static_cast<torch::optim::SGDOptions&>(optimizer.param_groups()[0].options()).lr();
}

}  // namespace

int main() {
  hvd::init();                                                                   // HVD
  programs::Checks checks("scheduler_clip");
  torch::set_default_dtype(caffe2::TypeMeta::Make<double>());
  auto model = make_model();
  ht::DistributedOptimizer optimizer(torch::optim::SGD(model->parameters(), 0.05),  // HVD
                                     model->named_parameters());                  // HVD
  ht::broadcast_parameters(*model, 0);                                           // HVD
  train(model, optimizer, programs::Shard::mine());
  auto reference = make_model();
  torch::optim::SGD ref_optimizer(reference->parameters(), 0.05);
  train(reference, ref_optimizer, programs::Shard::all());
  checks.expect(learning_rate(optimizer) < 0.05 && learning_rate(optimizer) == learning_rate(ref_optimizer),
                "the scheduler left learning rate " + std::to_string(learning_rate(optimizer)) +
                    " in the DistributedOptimizer but " + std::to_string(learning_rate(ref_optimizer)) +
                    " in the plain optimizer");

  checks.identical_across_ranks(model->named_parameters(), "parameter");
  checks.close(model->named_parameters(), reference->named_parameters(), 1e-9, "model vs one process");
  const int status = checks.finish();
  hvd::shutdown();                                                               // HVD
  return status;
}
