// Uneven data: rank r has kBatches + 3r batches (a sharded dataset that does not divide
// evenly). A rank that runs out calls hvd::join() and keeps serving the others' allreduces with
// zeros; afterwards everyone takes the parameters of the rank that joined last, as Horovod's
// join recipe does.
//
// Checks: identical parameters on every rank; equal to the closed form of what join computes,
// run in one process: while k of n ranks still train, the gradient is the sum of their batch
// gradients divided by n (joined ranks contribute zeros to the average).
#include "program_support.h"

namespace ht = hvd::torch;

namespace {

constexpr std::int64_t kBatch = 4;
constexpr int kBatches = 5;

int batches_of(int rank) { return kBatches + 3 * rank; }

torch::nn::Linear make_model() {
  torch::manual_seed(8);
  return torch::nn::Linear(3, 2);
}

std::pair<torch::Tensor, torch::Tensor> batch(int rank, int step) {
  torch::manual_seed(10000 * rank + step);
  const auto x = torch::randn({kBatch, 3});
  return {x, x.mm(torch::ones({3, 2})) + 0.5};
}

}  // namespace

int main() {
  hvd::init();                                                                   // HVD
  programs::Checks checks("uneven_join");
  torch::set_default_dtype(caffe2::TypeMeta::Make<double>());
  auto model = make_model();
  ht::DistributedOptimizer optimizer(torch::optim::SGD(model->parameters(), 0.05),  // HVD
                                     model->named_parameters());                  // HVD
  ht::broadcast_parameters(*model, 0);                                           // HVD
  for (int step = 0; step < batches_of(hvd::rank()); ++step) {
    auto [x, y] = batch(hvd::rank(), step);
    optimizer.zero_grad();
    torch::mse_loss(model->forward(x), y).backward();
    optimizer.step();
  }
  const int last = hvd::join();                                                  // HVD
  ht::broadcast_parameters(model->named_parameters(), last);                     // HVD
  checks.expect(last == hvd::size() - 1, "hvd::join() returned " + std::to_string(last) +
                                             " but the rank with the most batches is " + std::to_string(hvd::size() - 1));

  // The closed form, in one process: the summed loss of the ranks still training, over n.
  auto reference = make_model();
  torch::optim::SGD ref_optimizer(reference->parameters(), 0.05);
  for (int step = 0; step < batches_of(hvd::size() - 1); ++step) {
    ref_optimizer.zero_grad();
    torch::Tensor loss = torch::zeros({});
    for (int r = 0; r < hvd::size(); ++r) {
      if (step >= batches_of(r)) continue;
      auto [x, y] = batch(r, step);
      loss = loss + torch::mse_loss(reference->forward(x), y);
    }
    (loss / hvd::size()).backward();
    ref_optimizer.step();
  }
  checks.identical_across_ranks(model->named_parameters(), "parameter");
  checks.close(model->named_parameters(), reference->named_parameters(), 1e-9, "model vs the closed form");
  const int status = checks.finish();
  hvd::shutdown();                                                               // HVD
  return status;
}
