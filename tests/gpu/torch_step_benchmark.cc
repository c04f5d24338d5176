// Training-step time of hvd::torch::DistributedOptimizer against plain LibTorch on the same
// model and data, on the GPU. At np=1 the difference is the runtime's own overhead (hooks,
// negotiation, the NCCL path); scripts/gpu-check.sh prints it in its table. Exits with 77
// (skipped) when LibTorch sees no CUDA device. Usage: torch_step_benchmark [steps]
#include <cuda_runtime.h>
#include <horovodcpp/torch.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kBatch = 128;

torch::nn::Sequential make_model(const torch::Device& device) {
  torch::manual_seed(0);
  torch::nn::Sequential model(torch::nn::Linear(784, 1024), torch::nn::ReLU(), torch::nn::Linear(1024, 1024),
                              torch::nn::ReLU(), torch::nn::Linear(1024, 10));
  model->to(device);
  return model;
}

// Milliseconds per step (zero_grad, forward, backward, step), after a warm-up.
template <class Optimizer>
double time_steps(torch::nn::Sequential& model, Optimizer& optimizer, const torch::Tensor& x,
                  const torch::Tensor& y, int steps) {
  auto step = [&] {
    optimizer.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(model->forward(x), y);
    loss.backward();
    optimizer.step();
  };
  for (int i = 0; i < 20; ++i) step();
  cudaDeviceSynchronize();
  const auto start = Clock::now();
  for (int i = 0; i < steps; ++i) step();
  cudaDeviceSynchronize();
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count() / steps;
}

}  // namespace

int main(int argc, char** argv) {
  if (!torch::cuda::is_available()) {
    std::printf("SKIPPED: LibTorch sees no CUDA device; the step-time benchmark needs a GPU\n");
    return 77;
  }
  const int steps = argc > 1 ? std::atoi(argv[1]) : 200;
  hvd::init();
  const int device_index = hvd::local_rank() % static_cast<int>(torch::cuda::device_count());
  cudaSetDevice(device_index);
  const torch::Device device(torch::kCUDA, device_index);
  auto x = torch::randn({kBatch, 784}, torch::TensorOptions().device(device));
  auto y = torch::randint(0, 10, {kBatch}, torch::TensorOptions().device(device).dtype(torch::kLong));

  auto plain_model = make_model(device);
  torch::optim::SGD plain(plain_model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  const double plain_ms = time_steps(plain_model, plain, x, y, steps);

  auto hvd_model = make_model(device);
  hvd::torch::broadcast_parameters(hvd_model->named_parameters(), 0);
  hvd::torch::DistributedOptimizer ours(
      torch::optim::SGD(hvd_model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9)),
      hvd_model->named_parameters());
  const double ours_ms = time_steps(hvd_model, ours, x, y, steps);

  if (hvd::rank() == 0) {
    std::printf("| measurement | horovodcpp | reference | reference is | ratio |\n|---|---|---|---|---|\n");
    std::printf("| training step (MLP 784-1024-1024-10, batch %d, %d steps), np=%d | %.3f ms | %.3f ms | "
                "plain LibTorch SGD | %.2fx |\n", kBatch, steps, hvd::size(), ours_ms, plain_ms, ours_ms / plain_ms);
  }
  hvd::shutdown();
  return 0;
}
