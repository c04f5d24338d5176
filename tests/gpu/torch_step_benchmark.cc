// Training-step time of hvd::torch::DistributedOptimizer against plain LibTorch on the same
// model and data. At np=1 the optimizer registers no hooks and reduces nothing, so the difference
// is what wrapping it and the idle runtime beside the step cost; at np > 1 it adds the reduction
// (hooks, negotiation, the NCCL path). scripts/gpu-check.sh prints it in its table. Exits with 77
// (skipped) when LibTorch sees no CUDA device and --cpu was not given.
//
// Usage: torch_step_benchmark [steps] [--cpu] [--model mlp|small] [--rounds N]
//   --cpu       run on the host (no GPU needed)
//   --model     mlp: 784-1024-1024-10 (default); small: 80 layers 32-32, 160 parameters of at
//               most 4 KB, where the optimizer's fixed cost per parameter and step shows
//   --rounds N  N rounds, each timing `steps` plain, DistributedOptimizer and control steps
//               (the order rotating from round to round); prints the medians and the median of
//               each round's ratio to the plain steps
// A third variant, the control, is plain LibTorch SGD again on a third copy of the model: its row
// is the noise floor of the comparison (where each copy's memory lies, the order within a round),
// which a ratio of ours has to exceed before it says anything about the optimizer.
// With --cpu, a second row gives the training thread's own CPU time per step
// (CLOCK_THREAD_CPUTIME_ID): the optimizer's fixed cost per step is its difference, and unlike
// wall time it does not count the time other processes take the core (a shared machine) or the
// thread waits. (On the GPU the thread also spins in CUDA calls waiting for the device.)
#include <cuda_runtime.h>
#include <horovodcpp/torch.h>
#include <time.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Config {
  int steps = 200;
  bool cpu = false;
  std::string model = "mlp";
  int rounds = 1;
};

constexpr int kSmallLayers = 80;
constexpr int kSmallWidth = 32;

int batch_of(const Config& c) { return c.model == "small" ? 16 : 128; }
int inputs_of(const Config& c) { return c.model == "small" ? kSmallWidth : 784; }

torch::nn::Sequential make_model(const Config& c, const torch::Device& device) {
  torch::manual_seed(0);
  torch::nn::Sequential model;
  if (c.model == "small") {
    for (int i = 0; i < kSmallLayers; ++i) {
      model->push_back(torch::nn::Linear(kSmallWidth, kSmallWidth));
      model->push_back(torch::nn::Tanh());
    }
    model->push_back(torch::nn::Linear(kSmallWidth, 10));
  } else {
    model = torch::nn::Sequential(torch::nn::Linear(784, 1024), torch::nn::ReLU(), torch::nn::Linear(1024, 1024),
                                  torch::nn::ReLU(), torch::nn::Linear(1024, 10));
  }
  model->to(device);
  return model;
}

void sync(const Config& c) {
  if (!c.cpu) cudaDeviceSynchronize();
}

double thread_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

struct StepTime {
  double wall_ms;
  double cpu_ms;  // this thread's CPU time
};

// Milliseconds per step (zero_grad, forward, backward, step).
template <class Optimizer>
StepTime time_steps(const Config& c, torch::nn::Sequential& model, Optimizer& optimizer, const torch::Tensor& x,
                    const torch::Tensor& y, int steps) {
  auto step = [&] {
    optimizer.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(model->forward(x), y);
    loss.backward();
    optimizer.step();
  };
  sync(c);
  const auto start = Clock::now();
  const double cpu_start = thread_cpu_ms();
  for (int i = 0; i < steps; ++i) step();
  sync(c);
  return {std::chrono::duration<double, std::milli>(Clock::now() - start).count() / steps,
          (thread_cpu_ms() - cpu_start) / steps};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

Config parse(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--cpu") {
      c.cpu = true;
    } else if (a == "--model" && i + 1 < argc) {
      c.model = argv[++i];
    } else if (a == "--rounds" && i + 1 < argc) {
      c.rounds = std::max(1, std::atoi(argv[++i]));
    } else if (!a.empty() && a[0] != '-') {
      c.steps = std::atoi(a.c_str());
    } else {
      std::fprintf(stderr, "usage: torch_step_benchmark [steps] [--cpu] [--model mlp|small] [--rounds N]\n");
      std::exit(2);
    }
  }
  if (c.model != "mlp" && c.model != "small") {
    std::fprintf(stderr, "torch_step_benchmark: --model must be mlp or small, got '%s'\n", c.model.c_str());
    std::exit(2);
  }
  if (c.steps < 1) {
    std::fprintf(stderr, "torch_step_benchmark: steps must be positive\n");
    std::exit(2);
  }
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  const Config c = parse(argc, argv);
  if (!c.cpu && !torch::cuda::is_available()) {
    std::printf("SKIPPED: LibTorch sees no CUDA device; the step-time benchmark needs a GPU (or --cpu)\n");
    return 77;
  }
  hvd::init();
  torch::Device device(torch::kCPU);
  if (!c.cpu) {
    const int device_index = hvd::local_rank() % static_cast<int>(torch::cuda::device_count());
    cudaSetDevice(device_index);
    device = torch::Device(torch::kCUDA, device_index);
  }
  const int batch = batch_of(c);
  torch::manual_seed(1);
  auto x = torch::randn({batch, inputs_of(c)}, torch::TensorOptions().device(device));
  auto y = torch::randint(0, 10, {batch}, torch::TensorOptions().device(device).dtype(torch::kLong));

  auto plain_model = make_model(c, device);
  torch::optim::SGD plain(plain_model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));

  auto hvd_model = make_model(c, device);
  hvd::torch::broadcast_parameters(hvd_model->named_parameters(), 0);
  hvd::torch::DistributedOptimizer ours(
      torch::optim::SGD(hvd_model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9)),
      hvd_model->named_parameters());

  auto control_model = make_model(c, device);
  torch::optim::SGD control(control_model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));

  const int warmup = 20;
  time_steps(c, plain_model, plain, x, y, warmup);
  time_steps(c, hvd_model, ours, x, y, warmup);
  time_steps(c, control_model, control, x, y, warmup);
  // Per variant (0 plain, 1 ours, 2 control): each round's time, CPU time and ratios to plain.
  constexpr int kVariants = 3;
  std::vector<double> wall[kVariants], cpu[kVariants], wall_ratio[kVariants], cpu_ratio[kVariants];
  for (int r = 0; r < c.rounds; ++r) {
    StepTime t[kVariants];
    for (int k = 0; k < kVariants; ++k) {
      const int v = (r + k) % kVariants;  // each variant takes each place in turn
      if (v == 0) t[v] = time_steps(c, plain_model, plain, x, y, c.steps);
      if (v == 1) t[v] = time_steps(c, hvd_model, ours, x, y, c.steps);
      if (v == 2) t[v] = time_steps(c, control_model, control, x, y, c.steps);
    }
    for (int v = 0; v < kVariants; ++v) {
      wall[v].push_back(t[v].wall_ms);
      cpu[v].push_back(t[v].cpu_ms);
      wall_ratio[v].push_back(t[v].wall_ms / t[0].wall_ms);
      cpu_ratio[v].push_back(t[v].cpu_ms / t[0].cpu_ms);
    }
  }

  if (hvd::rank() == 0) {
    const std::string model = c.model == "small"
                                  ? "MLP of " + std::to_string(kSmallLayers) + " layers " +
                                        std::to_string(kSmallWidth) + "-" + std::to_string(kSmallWidth) + ", " +
                                        std::to_string(hvd_model->parameters().size()) + " parameters"
                                  : std::string("MLP 784-1024-1024-10");
    const std::string how = c.rounds > 1 ? std::to_string(c.rounds) + " rounds of " + std::to_string(c.steps) +
                                               " steps in rotating order, medians"
                                         : std::to_string(c.steps) + " steps";
    const std::string where = c.cpu ? ", CPU" : "";
    const int np = hvd::size();
    std::printf("| measurement | horovodcpp | reference | reference is | ratio |\n|---|---|---|---|---|\n");
    std::printf("| training step (%s, batch %d, %s%s), np=%d | %.3f ms | %.3f ms | plain LibTorch SGD | %.3fx |\n",
                model.c_str(), batch, how.c_str(), where.c_str(), np, median(wall[1]), median(wall[0]),
                median(wall_ratio[1]));
    std::printf("| control: plain LibTorch SGD again, on a third copy of the model (%s%s), np=%d | %.3f ms | %.3f ms | "
                "plain LibTorch SGD | %.3fx |\n",
                how.c_str(), where.c_str(), np, median(wall[2]), median(wall[0]), median(wall_ratio[2]));
    if (c.cpu) {
      std::printf("| training thread CPU per step (%s, batch %d, %s, CPU), np=%d | %.3f ms | %.3f ms | plain LibTorch "
                  "SGD | %.3fx |\n",
                  model.c_str(), batch, how.c_str(), np, median(cpu[1]), median(cpu[0]), median(cpu_ratio[1]));
      std::printf("| control: training thread CPU per step, plain LibTorch SGD again (%s, CPU), np=%d | %.3f ms | "
                  "%.3f ms | plain LibTorch SGD | %.3fx |\n",
                  how.c_str(), np, median(cpu[2]), median(cpu[0]), median(cpu_ratio[2]));
    }
  }
  hvd::shutdown();
  return 0;
}
