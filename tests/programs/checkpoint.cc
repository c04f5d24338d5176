// Checkpoint and resume, as LibTorch programs do it. `checkpoint train DIR` trains, then rank 0
// evaluates and saves the model and the optimizer with torch::save while the other ranks shut
// down and exit at once. `checkpoint resume DIR` (at any world size) has rank 0 load both with
// torch::load, broadcasts them, and trains on.
//
// The union batch has a fixed size whatever the world size, so the whole run equals one
// process training kSteps * 2 steps without interruption. Checks: identical parameters on every
// rank; the resumed run equals that single process (Adam's state must have survived the
// checkpoint for this to hold); the evaluation on rank 0 ran after its peers had left.
#include <chrono>
#include <thread>

#include "program_support.h"

namespace ht = hvd::torch;

namespace {

constexpr std::int64_t kUnionBatch = 8;
constexpr int kSteps = 12;

torch::nn::Sequential make_model() {
  torch::manual_seed(13);
  return torch::nn::Sequential(torch::nn::Linear(4, 8), torch::nn::Tanh(), torch::nn::Linear(8, 1));
}

void train(torch::nn::Sequential& model, torch::optim::Optimizer& optimizer, int first, int steps,
           const programs::Shard& shard) {
  model->train();
  for (int step = first; step < first + steps; ++step) {
    torch::manual_seed(40 + step);
    const auto x = torch::randn({kUnionBatch, 4});
    const auto y = x.pow(2).sum(1, true);
    optimizer.zero_grad();
    auto loss = torch::mse_loss(model->forward(shard.rows(x)), shard.rows(y));
    loss.backward();
    optimizer.step();
  }
}

double evaluate(torch::nn::Sequential& model) {
  torch::NoGradGuard no_grad;
  model->eval();
  torch::manual_seed(4242);
  const auto x = torch::randn({64, 4});
  return torch::mse_loss(model->forward(x), x.pow(2).sum(1, true)).item<double>();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::string(argv[1]) != "train" && std::string(argv[1]) != "resume")) {
    std::fprintf(stderr, "usage: checkpoint train|resume DIR\n");
    return 2;
  }
  const bool resume = std::string(argv[1]) == "resume";
  const std::string model_path = std::string(argv[2]) + "/model.pt";
  const std::string optimizer_path = std::string(argv[2]) + "/optimizer.pt";

  hvd::init();                                                                  // HVD
  programs::Checks checks(resume ? "checkpoint resume" : "checkpoint train");
  torch::set_default_dtype(caffe2::TypeMeta::Make<double>());
  auto model = make_model();
  ht::DistributedOptimizer optimizer(torch::optim::Adam(model->parameters(), 0.01),  // HVD
                                     model->named_parameters());                 // HVD
  if (resume && hvd::rank() == 0) {                                             // HVD: rank 0 reads
    torch::load(model, model_path);
    torch::load(optimizer, optimizer_path);
  }
  ht::broadcast_parameters(*model, 0);                                          // HVD
  ht::broadcast_optimizer_state(optimizer, 0);                                  // HVD
  train(model, optimizer, resume ? kSteps : 0, kSteps, programs::Shard::mine());
  checks.identical_across_ranks(model->named_parameters(), "parameter");

  if (resume) {
    auto reference = make_model();
    torch::optim::Adam ref_optimizer(reference->parameters(), 0.01);
    train(reference, ref_optimizer, 0, 2 * kSteps, programs::Shard::all());
    checks.close(model->named_parameters(), reference->named_parameters(), 1e-9,
                 "resumed model vs one process without a checkpoint");
    const int status = checks.finish();
    hvd::shutdown();                                                            // HVD
    return status;
  }

  if (hvd::rank() != 0) {  // the other ranks are done: they leave while rank 0 evaluates
    const int status = checks.finish();
    hvd::shutdown();                                                            // HVD
    return status;
  }
  const int status = checks.finish();
  std::this_thread::sleep_for(std::chrono::milliseconds(hvd::size() > 1 ? 1500 : 0));  // a slow evaluation
  const double loss = evaluate(model);
  if (hvd::rank() == 0) {                                                       // HVD: one writer
    torch::save(model, model_path);
    torch::save(optimizer, optimizer_path);
  }
  std::printf("[checkpoint train] rank %d of %d: evaluation loss %.4f; saved %s\n", hvd::rank(), hvd::size(), loss,
              model_path.c_str());
  hvd::shutdown();                                                              // HVD
  return status;
}
