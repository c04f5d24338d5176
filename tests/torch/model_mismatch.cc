// A model that differs between ranks fails on every rank at once, whether the program catches
// the error or not (Note [A model that differs between ranks fails on every rank]). The last
// rank is the odd one. Usage: model_mismatch caught | uncaught SCENARIO
//   caught:   every scenario in turn; each rank catches the error, checks its message, then an
//             allreduce shows the runtime still works. Prints "PASS rank R" at the end.
//   uncaught: one scenario; the error leaves main (std::terminate) on every rank.
// Scenarios: extra_layer and frozen (differ from construction on, found in the first reduction
// round); unfrozen and group_added (differ after a step, found in the next round); cast and
// resized (the same parameters changed in place after a step: the description each round may not
// be one kept from the first); alltoall (bad splits on one rank, refused there before submission).
// Each failing call must fail within kLimit; prints "FAILED rank R SCENARIO after S s: MESSAGE".
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "horovodcpp/torch.h"
#include "tests/common/rank_markers.h"

namespace ht = hvd::torch;

namespace {

constexpr double kLimit = 10.0;  // seconds: "at once", with room for a loaded CI machine
int g_failures = 0;

void fail(const std::string& why) {
  std::printf("FAIL rank %d: %s\n", hvd::rank(), why.c_str());
  std::fflush(stdout);
  ++g_failures;
}

bool odd_rank() { return hvd::rank() == hvd::size() - 1; }

struct NetImpl : torch::nn::Module {
  // spare: a parameter forward never uses (its gradient is zeros, or none on every rank).
  explicit NetImpl(bool extra, bool with_spare = false) {
    fc1 = register_module("fc1", torch::nn::Linear(6, 8));
    fc2 = register_module("fc2", torch::nn::Linear(8, 4));
    if (extra) fc3 = register_module("fc3", torch::nn::Linear(4, 4));
    if (with_spare) spare = register_parameter("spare", torch::zeros({3}));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = fc2(torch::tanh(fc1(x)));
    return fc3 ? fc3(x) : x;
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
  torch::Tensor spare;
};
TORCH_MODULE(Net);

// One training step (forward, backward, step) of `net` with `optimizer`.
void train_step(Net& net, ht::DistributedOptimizer& optimizer) {
  optimizer.zero_grad();
  auto loss = net->forward(torch::ones({2, 6}, net->fc1->weight.options()) * (hvd::rank() + 1)).sum();
  loss.backward();
  optimizer.step();
}

// Runs the scenario up to the call that must fail on every rank; returns that call's message
// ("" when nothing failed).
std::string run(const std::string& scenario) {
  torch::manual_seed(1);
  if (scenario == "extra_layer") {
    Net net(odd_rank());
    ht::DistributedOptimizer opt(torch::optim::SGD(net->parameters(), 0.1), net->named_parameters());
    train_step(net, opt);
    return "";
  }
  if (scenario == "frozen") {
    Net net(false);
    if (odd_rank()) net->fc1->weight.requires_grad_(false);
    ht::DistributedOptimizer opt(torch::optim::SGD(net->parameters(), 0.1), net->named_parameters());
    train_step(net, opt);
    return "";
  }
  if (scenario == "unfrozen") {
    Net net(false);
    net->fc1->weight.requires_grad_(false);
    ht::DistributedOptimizer opt(torch::optim::SGD(net->parameters(), 0.1), net->named_parameters());
    train_step(net, opt);  // the same everywhere: fine
    if (odd_rank()) net->fc1->weight.requires_grad_(true);
    for (int i = 0; i < 3; ++i) train_step(net, opt);
    return "";
  }
  if (scenario == "group_added") {
    Net net(true);
    net->fc3->weight.requires_grad_(true);
    std::vector<torch::Tensor> first = {net->fc1->weight, net->fc1->bias, net->fc2->weight, net->fc2->bias};
    ht::DistributedOptimizer opt(torch::optim::SGD(first, 0.1), net->named_parameters());
    train_step(net, opt);
    if (odd_rank())
      opt.add_param_group(torch::optim::OptimizerParamGroup({net->fc3->weight, net->fc3->bias}));
    for (int i = 0; i < 3; ++i) train_step(net, opt);
    return "";
  }
  if (scenario == "cast") {
    Net net(false);
    ht::DistributedOptimizer opt(torch::optim::SGD(net->parameters(), 0.1), net->named_parameters());
    train_step(net, opt);
    if (odd_rank()) net->to(torch::kFloat64);  // set_data(): the optimizer's tensors, now float64
    for (int i = 0; i < 3; ++i) train_step(net, opt);
    return "";
  }
  if (scenario == "resized") {
    // The unused parameter: backward never meets its gradient accumulator, which keeps the old
    // shape (autograd would refuse a used one's gradient on that rank alone).
    Net net(false, true);
    ht::DistributedOptimizer opt(torch::optim::SGD(net->parameters(), 0.1), net->named_parameters());
    train_step(net, opt);
    if (odd_rank()) net->spare.set_data(torch::zeros({4}));
    for (int i = 0; i < 3; ++i) train_step(net, opt);
    return "";
  }
  if (scenario == "alltoall") {
    auto t = torch::arange(2 * hvd::size(), torch::kFloat32).reshape({2 * hvd::size(), 1});
    std::vector<std::int64_t> splits(hvd::size(), 2);
    if (odd_rank()) splits[0] = 3;  // sums to 2 * size + 1: refused here, before submission
    ht::alltoall(t, {splits, "mismatch.alltoall"});
    return "";
  }
  fail("unknown scenario " + scenario);
  return "";
}

// What every rank's message must say.
std::string expected(const std::string& scenario) {
  const std::string last = std::to_string(hvd::size() - 1);
  if (scenario == "extra_layer") return "parameter 'fc3.weight' (Float [4, 4]) exists on rank " + last + " but not on rank 0";
  if (scenario == "frozen") return "parameter 'fc1.weight' requires grad on rank 0 but is frozen (requires_grad false) on rank " + last;
  if (scenario == "unfrozen") return "parameter 'fc1.weight' is frozen (requires_grad false) on rank 0 but requires grad on rank " + last;
  if (scenario == "group_added") return "parameter 'fc3.weight' is updated by the optimizer on rank " + last + " but not on rank 0";
  if (scenario == "cast") return "parameter 'fc1.weight' is Float [8, 6] on rank 0 but Double [8, 6] on rank " + last;
  if (scenario == "resized") return "parameter 'spare' is Float [3] on rank 0 but Float [4] on rank " + last;
  return "alltoall of 'mismatch.alltoall': splits sum to " + std::to_string(2 * hvd::size() + 1);
}

void check_still_works(const std::string& scenario) {
  auto t = torch::full({3}, hvd::rank() + 1.0);
  auto sum = ht::allreduce(t, {hvd::ReduceOp::Sum, "after." + scenario});
  const double want = hvd::size() * (hvd::size() + 1) / 2.0;
  if (sum[2].item<double>() != want)
    fail("after " + scenario + ": allreduce gave " + std::to_string(sum[2].item<double>()) + ", expected " +
         std::to_string(want));
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  hvd::init();
  if (mode == "uncaught") {
    // Before hvd's own handler (which shuts down and aborts): say what arrived, and let every
    // rank say it before the first to abort makes mpirun end the others.
    static std::terminate_handler hvd_handler = std::set_terminate([] {
      try {
        std::rethrow_exception(std::current_exception());
      } catch (const std::exception& e) {
        std::printf("UNCAUGHT rank %d: %s\n", hvd::rank(), e.what());
      } catch (...) {
      }
      std::fflush(stdout);
      const char* dir = std::getenv("HVD_TEST_DIR");
      if (dir != nullptr)
        hvd::test::mark_and_wait_for_ranks(std::string(dir) + "/uncaught.", hvd::rank(), hvd::size(),
                                           std::chrono::seconds(5));
      hvd_handler();
    });
    run(argc > 2 ? argv[2] : "");  // throws on every rank: std::terminate
    fail("no error");
    hvd::shutdown();
    return 1;
  }
  for (const std::string scenario :
       {"extra_layer", "frozen", "unfrozen", "group_added", "cast", "resized", "alltoall"}) {
    const auto start = std::chrono::steady_clock::now();
    std::string message;
    try {
      run(scenario);
    } catch (const hvd::Error& e) {
      message = e.what();
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("FAILED rank %d %s after %.3f s: %s\n", hvd::rank(), scenario.c_str(), seconds, message.c_str());
    std::fflush(stdout);
    if (message.empty()) fail(scenario + ": no error");
    if (message.find(expected(scenario)) == std::string::npos)
      fail(scenario + ": the message lacks \"" + expected(scenario) + "\"");
    if (seconds > kLimit) fail(scenario + ": took " + std::to_string(seconds) + " s");
    check_still_works(scenario);
  }
  hvd::barrier();
  if (g_failures == 0) std::printf("PASS rank %d\n", hvd::rank());
  hvd::shutdown();
  return g_failures == 0 ? 0 : 1;
}
