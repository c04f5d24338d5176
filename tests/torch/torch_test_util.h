// Small models and data shared by the torch tests; every rank builds the same ones from fixed
// seeds so a rank can compute the single-process reference locally. Include it instead of
// catch.hpp: LibTorch's glog defines its own CHECK (which aborts and reports nothing to Catch),
// so LibTorch comes first and Catch's CHECK replaces it.
#pragma once

#include <torch/torch.h>

#ifdef CHECK
#undef CHECK
#endif
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

#include "horovodcpp/torch.h"

namespace hvd_test {

// Runs `f` and returns the message of the hvd::Error it throws ("" when it throws none). Any
// other exception escapes and fails the test case: users must only ever see hvd::Error.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const hvd::Error& e) {
    return e.what();
  }
  return "";
}

// A three-layer MLP without batch norm.
struct MlpImpl : torch::nn::Module {
  MlpImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(8, 16));
    fc2 = register_module("fc2", torch::nn::Linear(16, 12));
    fc3 = register_module("fc3", torch::nn::Linear(12, 4));
  }
  torch::Tensor forward(torch::Tensor x) { return fc3(torch::tanh(fc2(torch::tanh(fc1(x))))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
};
TORCH_MODULE(Mlp);

// A model built from `seed`, the same on every rank.
inline Mlp make_mlp(std::uint64_t seed) {
  torch::manual_seed(seed);
  return Mlp();
}

inline void copy_parameters(const torch::nn::Module& from, torch::nn::Module& to) {
  torch::NoGradGuard no_grad;
  auto src = from.parameters();
  auto dst = to.parameters();
  for (std::size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
}

// All parameters of `m`, flattened into one tensor.
inline torch::Tensor flat(const torch::nn::Module& m) {
  std::vector<torch::Tensor> parts;
  for (const auto& p : m.parameters()) parts.push_back(p.detach().reshape({-1}));
  return torch::cat(parts);
}

inline double max_abs_diff(const torch::nn::Module& a, const torch::nn::Module& b) {
  double worst = 0;
  auto pa = a.parameters();
  auto pb = b.parameters();
  for (std::size_t i = 0; i < pa.size(); ++i)
    worst = std::max(worst, (pa[i] - pb[i]).abs().max().item<double>());
  return worst;
}

// The per-parameter state an optimizer keeps for `p` (null if none), whatever the key type of
// this LibTorch's state map (a string of the TensorImpl address, or the address itself).
template <class State>
State* param_state(torch::optim::Optimizer& optimizer, const torch::Tensor& p) {
  auto& map = optimizer.state();
  using Key = typename std::decay_t<decltype(map)>::key_type;
  Key key;
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream out;
    out << p.unsafeGetTensorImpl();
    key = out.str();
  } else {
    key = p.unsafeGetTensorImpl();
  }
  auto it = map.find(key);
  return it == map.end() ? nullptr : static_cast<State*>(it->second.get());
}

// Whether a [cuda] case runs here: with a CUDA device LibTorch can use and the NCCL backend. On
// a machine with a GPU (/dev/nvidia0, or HVD_TEST_EXPECT_CUDA=1 as scripts/gpu-check.sh sets)
// anything less fails the case instead of skipping it: a CPU-only LibTorch or a build without NCCL
// there must not pass as a GPU run.
inline bool cuda_case_runs() {
  const bool torch_cuda = torch::cuda::is_available();
  if (torch_cuda && hvd::nccl_built()) return true;
  const char* expect = std::getenv("HVD_TEST_EXPECT_CUDA");
  const bool gpu_here = (expect != nullptr && std::string(expect) == "1") || std::filesystem::exists("/dev/nvidia0");
  if (gpu_here) {
    FAIL((torch_cuda ? "horovodcpp was built without the NCCL backend"
                     : "a CUDA device is present but this LibTorch sees none (a LibTorch without CUDA?)"));
  }
  return false;
}

// Rank 0's timeline over a run of steps in which a parameter is frozen (only rank 0 records;
// nothing is reduced at size 1): no collective named `frozen` ran (one of zeros would leave the
// values in place, so only the timeline shows it), while one named `trained` did.
class FrozenSteps {
 public:
  FrozenSteps(std::string frozen, std::string trained, const std::string& file)
      : frozen_(std::move(frozen)), trained_(std::move(trained)),
        path_(file + "_np" + std::to_string(hvd::size()) + ".json") {}
  void begin() {
    if (hvd::size() == 1 || recording_) return;
    hvd::start_timeline(path_);
    recording_ = true;
  }
  void end() {
    if (!recording_) return;
    hvd::stop_timeline();
    recording_ = false;
    if (hvd::rank() != 0) return;
    std::ifstream file(path_);
    std::stringstream text;
    text << file.rdbuf();
    std::remove(path_.c_str());
    CHECK(text.str().find(trained_) != std::string::npos);
    INFO("collectives named " << frozen_ << "* while it was frozen");
    CHECK(text.str().find(frozen_) == std::string::npos);
  }

 private:
  std::string frozen_, trained_, path_;
  bool recording_ = false;
};


}  // namespace hvd_test
