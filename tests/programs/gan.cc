// A GAN in the shape of LibTorch's DCGAN example (examples/cpp/dcgan): two models, two
// optimizers, the discriminator stepped after two backward passes (real, then fake), the
// generator's backward flowing through the discriminator's parameters, module->zero_grad() at
// the top of each step. Small MLPs on 2-D points so it runs in seconds.
//
// Checks: every rank ends with bit-identical parameters, and the np=N run equals the same
// training function run in one process, with plain optimizers, on the union of the batches.
#include "program_support.h"

namespace ht = hvd::torch;

namespace {

constexpr std::int64_t kNoise = 4, kBatch = 16;
constexpr int kSteps = 40;

torch::nn::Sequential make_generator() {
  return torch::nn::Sequential(torch::nn::Linear(kNoise, 16), torch::nn::ReLU(), torch::nn::Linear(16, 2));
}
torch::nn::Sequential make_discriminator() {
  return torch::nn::Sequential(torch::nn::Linear(2, 16), torch::nn::LeakyReLU(torch::nn::LeakyReLUOptions().negative_slope(0.2)),
                               torch::nn::Linear(16, 1), torch::nn::Sigmoid());
}

// The step's union batch (real points on a ring, and the generator's noise), the same on every
// rank, and the shard's rows of it.
std::pair<torch::Tensor, torch::Tensor> batch(int step, const programs::Shard& shard) {
  torch::manual_seed(1000 + step);
  const auto angle = torch::rand({kBatch * shard.world, 1}) * 6.2831853;
  const auto real = torch::cat({torch::cos(angle), torch::sin(angle)}, 1) * 2.0;
  const auto noise = torch::randn({kBatch * shard.world, kNoise});
  return {shard.rows(real), shard.rows(noise)};
}

// LibTorch's DCGAN loop, written against torch::optim::Optimizer&.
void train(torch::nn::Sequential& generator, torch::nn::Sequential& discriminator,
           torch::optim::Optimizer& generator_optimizer, torch::optim::Optimizer& discriminator_optimizer,
           const programs::Shard& shard) {
  for (int step = 0; step < kSteps; ++step) {
    auto [real_points, noise] = batch(step, shard);
    // Train the discriminator on real and fake points.
    discriminator->zero_grad();
    torch::Tensor real_labels = torch::full({real_points.size(0), 1}, 0.9);
    torch::Tensor real_output = discriminator->forward(real_points);
    torch::Tensor d_loss_real = torch::binary_cross_entropy(real_output, real_labels);
    d_loss_real.backward();

    torch::Tensor fake_points = generator->forward(noise);
    torch::Tensor fake_labels = torch::zeros({fake_points.size(0), 1});
    torch::Tensor fake_output = discriminator->forward(fake_points.detach());
    torch::Tensor d_loss_fake = torch::binary_cross_entropy(fake_output, fake_labels);
    d_loss_fake.backward();
    discriminator_optimizer.step();

    // Train the generator; its backward runs through the discriminator's parameters.
    generator->zero_grad();
    fake_labels.fill_(1);
    fake_output = discriminator->forward(fake_points);
    torch::Tensor g_loss = torch::binary_cross_entropy(fake_output, fake_labels);
    g_loss.backward();
    generator_optimizer.step();
  }
}

}  // namespace

int main() {
  hvd::init();                                                     // HVD
  programs::Checks checks("gan");
  torch::set_default_dtype(caffe2::TypeMeta::Make<double>());  // so "equal" can be tight
  torch::manual_seed(7);
  auto generator = make_generator();
  auto discriminator = make_discriminator();
  ht::DistributedOptimizerOptions g_options, d_options;            // HVD: one name per optimizer
  g_options.name = "generator";                                    // HVD
  d_options.name = "discriminator";                                // HVD
  ht::DistributedOptimizer generator_optimizer(                    // HVD
      torch::optim::Adam(generator->parameters(), torch::optim::AdamOptions(2e-3).betas({0.5, 0.999})),
      generator->named_parameters(), g_options);                   // HVD
  ht::DistributedOptimizer discriminator_optimizer(                // HVD
      torch::optim::Adam(discriminator->parameters(), torch::optim::AdamOptions(2e-3).betas({0.5, 0.999})),
      discriminator->named_parameters(), d_options);               // HVD
  ht::broadcast_parameters(*generator, 0);                         // HVD
  ht::broadcast_parameters(*discriminator, 0);                     // HVD
  train(generator, discriminator, generator_optimizer, discriminator_optimizer, programs::Shard::mine());

  // The reference: the same models and loop in one process on the union batches.
  torch::manual_seed(7);
  auto ref_generator = make_generator();
  auto ref_discriminator = make_discriminator();
  torch::optim::Adam ref_g(ref_generator->parameters(), torch::optim::AdamOptions(2e-3).betas({0.5, 0.999}));
  torch::optim::Adam ref_d(ref_discriminator->parameters(), torch::optim::AdamOptions(2e-3).betas({0.5, 0.999}));
  train(ref_generator, ref_discriminator, ref_g, ref_d, programs::Shard::all());

  checks.identical_across_ranks(generator->named_parameters(), "generator parameter");
  checks.identical_across_ranks(discriminator->named_parameters(), "discriminator parameter");
  checks.close(generator->named_parameters(), ref_generator->named_parameters(), 1e-9, "generator vs one process");
  checks.close(discriminator->named_parameters(), ref_discriminator->named_parameters(), 1e-9,
               "discriminator vs one process");
  const int status = checks.finish();
  hvd::shutdown();                                                 // HVD
  return status;
}
