// Batch normalization in data-parallel training, both ways a user writes it: LibTorch's
// torch::nn::BatchNorm1d (each rank normalizes with its own batch's statistics) and
// hvd::torch::SyncBatchNorm as a drop-in (statistics of the union of the batches). After
// training, rank 0 evaluates with the running statistics.
//
// Checks: parameters identical on every rank in both cases. With SyncBatchNorm, the running
// statistics are identical too, and parameters, running statistics and evaluation outputs equal
// one process with BatchNorm1d on the union batches. With per-rank BatchNorm at np > 1 they do
// not, which the program shows as well.
#include "program_support.h"

namespace ht = hvd::torch;

namespace {

constexpr std::int64_t kBatch = 6;
constexpr int kSteps = 25;

struct NetImpl : torch::nn::Module {
  explicit NetImpl(torch::nn::AnyModule norm)
      : fc1(register_module("fc1", torch::nn::Linear(4, 10))),
        fc2(register_module("fc2", torch::nn::Linear(10, 2))),
        norm(std::move(norm)) {
    register_module("bn", this->norm.ptr());
  }
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::relu(norm.forward(fc1(x)))); }
  torch::nn::Linear fc1, fc2;
  torch::nn::AnyModule norm;
};
TORCH_MODULE(Net);

Net make_net(torch::nn::AnyModule norm) {
  torch::manual_seed(5);
  return Net(std::move(norm));
}

void train(Net& model, torch::optim::Optimizer& optimizer, const programs::Shard& shard) {
  model->train();
  for (int step = 0; step < kSteps; ++step) {
    torch::manual_seed(700 + step);
    const auto x = torch::randn({kBatch * shard.world, 4}) * 2 + 1;
    const auto y = torch::randint(0, 2, {kBatch * shard.world});
    optimizer.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(model->forward(shard.rows(x)), shard.rows(y));
    loss.backward();
    optimizer.step();
  }
}

torch::Tensor evaluate(Net& model) {
  torch::NoGradGuard no_grad;
  model->eval();
  torch::manual_seed(99);
  return model->forward(torch::randn({16, 4}));
}

}  // namespace

int main() {
  hvd::init();                                                              // HVD
  programs::Checks checks("batchnorm");
  torch::set_default_dtype(caffe2::TypeMeta::Make<double>());

  auto reference = make_net(torch::nn::AnyModule(torch::nn::BatchNorm1d(10)));
  torch::optim::SGD ref_optimizer(reference->parameters(), torch::optim::SGDOptions(0.1).momentum(0.5));
  train(reference, ref_optimizer, programs::Shard::all());

  for (const bool sync : {false, true}) {
    const std::string kind = sync ? "SyncBatchNorm" : "BatchNorm1d";
    auto model = make_net(sync ? torch::nn::AnyModule(ht::SyncBatchNorm(10))        // HVD
                               : torch::nn::AnyModule(torch::nn::BatchNorm1d(10)));
    ht::DistributedOptimizerOptions options;                                  // HVD
    options.name = kind;                                                      // HVD
    ht::DistributedOptimizer optimizer(                                       // HVD
        torch::optim::SGD(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.5)),
        model->named_parameters(), options);                                  // HVD
    ht::broadcast_parameters(*model, 0);                                      // HVD
    train(model, optimizer, programs::Shard::mine());
    checks.identical_across_ranks(model->named_parameters(), kind + " parameter");
    if (sync) {
      checks.identical_across_ranks(model->named_buffers(), kind + " buffer");
      checks.close(model->named_parameters(), reference->named_parameters(), 1e-9, kind + " parameters vs one process");
      checks.close(model->named_buffers(), reference->named_buffers(), 1e-9, kind + " running statistics vs one process");
    }
    if (hvd::rank() == 0) {  // evaluation on rank 0 only, as after a real training run
      const double gap = (evaluate(model) - evaluate(reference)).abs().max().item<double>();
      std::printf("[batchnorm] %s: evaluation differs from one process by %.3g\n", kind.c_str(), gap);
      if (sync) checks.expect(gap < 1e-9, kind + " evaluation differs from one process by " + std::to_string(gap));
      if (!sync && hvd::size() > 1)
        checks.expect(gap > 1e-6, "per-rank BatchNorm1d matched one process, so this check could not tell them apart");
    }
  }
  const int status = checks.finish();
  hvd::shutdown();                                                            // HVD
  return status;
}
