// LibTorch's MNIST-example network shape (conv, Dropout2d, dropout in forward) on synthetic
// images. Each rank draws its own dropout masks, so no single process reproduces the run; what
// must hold is that the ranks stay in lockstep and the loss falls.
//
// Checks: identical parameters on every rank after training; the loss averaged over ranks fell;
// evaluation (dropout off) gives the same outputs on every rank.
#include "program_support.h"

namespace ht = hvd::torch;

namespace {

struct NetImpl : torch::nn::Module {
  NetImpl()
      : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 4, 3)))),
        conv2_drop(register_module("conv2_drop", torch::nn::Dropout2d())),
        fc1(register_module("fc1", torch::nn::Linear(4 * 3 * 3, 16))),
        fc2(register_module("fc2", torch::nn::Linear(16, 3))) {}
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(torch::max_pool2d(conv2_drop->forward(conv1->forward(x)), 2));
    x = torch::relu(fc1->forward(x.view({-1, 4 * 3 * 3})));
    x = torch::dropout(x, 0.3, is_training());
    return torch::log_softmax(fc2->forward(x), 1);
  }
  torch::nn::Conv2d conv1;
  torch::nn::Dropout2d conv2_drop;
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Net);

// Three classes of 8x8 images: a bright row, a bright column, a bright diagonal, plus noise.
std::pair<torch::Tensor, torch::Tensor> images(std::int64_t n) {
  auto y = torch::randint(0, 3, {n});
  auto x = 0.3 * torch::randn({n, 1, 8, 8});
  for (std::int64_t i = 0; i < n; ++i) {
    const auto c = y[i].item<std::int64_t>();
    if (c == 0) x[i][0][3] += 1.0;
    if (c == 1) x[i][0].select(1, 4) += 1.0;
    if (c == 2) x[i][0] += torch::eye(8);
  }
  return {x, y};
}

}  // namespace

int main() {
  hvd::init();                                                            // HVD
  programs::Checks checks("dropout");
  torch::manual_seed(1);
  Net model;
  ht::DistributedOptimizer optimizer(torch::optim::SGD(model->parameters(), 0.1 * hvd::size()),  // HVD
                                     model->named_parameters());          // HVD
  ht::broadcast_parameters(*model, 0);                                    // HVD
  torch::manual_seed(100 + hvd::rank());                                  // HVD: each rank its own data and masks
  double first = 0, last = 0;
  model->train();
  for (int step = 0; step < 80; ++step) {
    auto [x, y] = images(16);
    optimizer.zero_grad();
    auto loss = torch::nll_loss(model->forward(x), y);
    loss.backward();
    optimizer.step();
    const double average = ht::metric_average(loss.item<double>(), "loss");  // HVD
    if (step < 5) first += average / 5;
    if (step >= 75) last += average / 5;
  }
  std::printf("[dropout] rank %d: loss %.4f -> %.4f\n", hvd::rank(), first, last);
  checks.expect(last < 0.7 * first, "the loss did not fall: " + std::to_string(first) + " -> " + std::to_string(last));
  checks.identical_across_ranks(model->named_parameters(), "parameter");
  model->eval();
  torch::manual_seed(5);
  auto [test_x, test_y] = images(32);
  torch::NoGradGuard no_grad;
  torch::OrderedDict<std::string, torch::Tensor> outputs;
  outputs.insert("evaluation output", model->forward(test_x));
  checks.identical_across_ranks(outputs, "evaluation");
  const int status = checks.finish();
  hvd::shutdown();                                                        // HVD
  return status;
}
