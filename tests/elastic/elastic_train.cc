// A small LibTorch training job run by tests/elastic under hvdrun's elastic mode. It commits its
// model, its optimizer (SGD with momentum, through DistributedOptimizer), its epoch and step
// counters and an ElasticSampler every few steps, and prints what the test checks afterwards:
//   START    launch=L rank=R size=S commit=C step=N time=T pid=P  (each rank, after the restore)
//   FIRST    launch=L step=N time=T       (rank 0, when the first step after the restore is done)
//   STEP     launch=L rank=R step=N epoch=E idx=i,j,...  (each rank, each step: the samples used)
//   COMMIT   launch=L id=C step=N         (rank 0)
//   RESET    launch=L size=S lr=X         (on_reset after a change of world size)
//   PARAMS   launch=L rank=R step=N seen=N hash=H   (each rank, at the end)
// L is rank 0's parent's pid (one mpirun per launch); T is the wall clock in seconds.
// Usage: elastic_train EPOCHS SAMPLES BATCH COMMIT_EVERY STEP_MS
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <thread>

#include <torch/torch.h>

#include "horovodcpp/torch.h"

namespace ht = hvd::torch;

namespace {

struct NetImpl : torch::nn::Module {
  NetImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(8, 16));
    fc2 = register_module("fc2", torch::nn::Linear(16, 1));
    seen = register_buffer("seen", torch::zeros({1}, torch::kFloat64));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2->forward(torch::tanh(fc1->forward(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::Tensor seen;  // steps trained: a buffer, so the commit must carry buffers too
};
TORCH_MODULE(Net);

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Sample i of the synthetic data set: features and a target that a small net can fit.
std::pair<torch::Tensor, torch::Tensor> samples(const std::vector<std::int64_t>& indices) {
  auto idx = torch::tensor(indices, torch::kInt64).to(torch::kFloat32).reshape({-1, 1});
  auto x = torch::sin(idx * torch::arange(1, 9, torch::kFloat32) * 0.37);
  auto y = torch::cos(idx * 0.11);
  return {x, y.reshape({-1, 1})};
}

std::uint64_t hash_parameters(const Net& net) {
  std::uint64_t h = 1469598103934665603ULL;
  for (const auto& p : net->parameters()) {
    auto c = p.detach().contiguous();
    const auto* bytes = static_cast<const unsigned char*>(c.data_ptr());
    for (std::int64_t i = 0; i < c.numel() * static_cast<std::int64_t>(c.element_size()); ++i)
      h = (h ^ bytes[i]) * 1099511628211ULL;
  }
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::cerr << "usage: elastic_train EPOCHS SAMPLES BATCH COMMIT_EVERY STEP_MS\n";
    return 2;
  }
  const std::int64_t epochs = std::atoll(argv[1]), dataset = std::atoll(argv[2]),
                     batch = std::atoll(argv[3]), commit_every = std::atoll(argv[4]),
                     step_ms = std::atoll(argv[5]);
  torch::set_num_threads(1);
  torch::manual_seed(1);
  hvd::init();
  const long launch = static_cast<long>(ht::broadcast_object<std::int64_t>(getppid(), 0, "launch"));
  const double base_lr = 0.02;

  Net net;
  ht::DistributedOptimizer optimizer(
      torch::optim::SGD(net->parameters(), torch::optim::SGDOptions(base_lr * hvd::size()).momentum(0.9)),
      net->named_parameters());
  std::int64_t epoch = 0, step = 0;
  hvd::elastic::ElasticSampler sampler(dataset, /*shuffle=*/true, /*seed=*/7);

  ht::elastic::State state(*net, optimizer);
  state.track("epoch", epoch).track("step", step).track("sampler", sampler);
  state.on_reset([&] {
    // Horovod's idiom: the learning rate follows the number of workers.
    auto& options = static_cast<torch::optim::SGDOptions&>(optimizer.param_groups()[0].options());
    options.lr(base_lr * hvd::size());
    if (hvd::rank() == 0)
      std::cout << "RESET launch=" << launch << " size=" << hvd::size() << " lr=" << options.lr() << std::endl;
  });

  hvd::elastic::run(state, [&](ht::elastic::State& s) {
    std::printf("START launch=%ld rank=%d size=%d commit=%lld step=%lld time=%.3f pid=%d\n", launch,
                hvd::rank(), hvd::size(), static_cast<long long>(s.commit_id()),
                static_cast<long long>(step), now_seconds(), static_cast<int>(getpid()));
    std::fflush(stdout);
    bool first = true;
    for (; epoch < epochs; ++epoch) {
      sampler.set_epoch(epoch);
      const std::int64_t steps = sampler.num_batches(batch);
      for (std::int64_t i = 0; i < steps; ++i) {
        const auto indices = sampler.batch(i, batch);
        auto [x, y] = samples(indices);
        optimizer.zero_grad();
        auto loss = (net->forward(x) - y).pow(2).sum() / static_cast<double>(batch);
        loss.backward();
        optimizer.step();
        {
          torch::NoGradGuard no_grad;
          net->seen.add_(1);
        }
        sampler.record_batch(i, batch);
        ++step;
        std::ostringstream line;
        line << "STEP launch=" << launch << " rank=" << hvd::rank() << " step=" << step
             << " epoch=" << epoch << " idx=";
        for (std::size_t k = 0; k < indices.size(); ++k) line << (k ? "," : "") << indices[k];
        std::cout << line.str() << std::endl;
        if (first && hvd::rank() == 0)
          std::printf("FIRST launch=%ld step=%lld time=%.3f\n", launch, static_cast<long long>(step), now_seconds());
        first = false;
        std::fflush(stdout);
        if (step % commit_every == 0) {
          s.commit();
          if (hvd::rank() == 0)
            std::cout << "COMMIT launch=" << launch << " id=" << s.commit_id() << " step=" << step << std::endl;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
      }
    }
  });
  std::printf("PARAMS launch=%ld rank=%d size=%d step=%lld seen=%.0f hash=%016llx\n", launch, hvd::rank(),
              hvd::size(), static_cast<long long>(step), net->seen.item<double>(),
              static_cast<unsigned long long>(hash_parameters(net)));
  std::fflush(stdout);
  hvd::shutdown();
  return 0;
}
