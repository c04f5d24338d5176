// hvd::torch::elastic::State (included by horovodcpp/torch.h): elastic training for LibTorch
// programs. The State holds a module (parameters and buffers), its optimizer and tracked user
// values, committed and restored by hvd::elastic (see horovodcpp/elastic.h, docs/elastic.md).
//
//   hvd::torch::elastic::State state(*model, optimizer);
//   std::int64_t epoch = 0, step = 0;
//   hvd::elastic::ElasticSampler sampler(dataset_size);
//   state.track("epoch", epoch).track("step", step).track("sampler", sampler);
//   state.on_reset([&] { /* e.g. rescale the learning rate to hvd::size() */ });
//   hvd::elastic::run(state, [&](auto& s) { ... s.commit(); ... });
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "horovodcpp/elastic.h"

namespace hvd::torch::elastic {

// The module, optimizer and tracked values are the user's and must outlive the State; a commit
// copies them (through LibTorch's own archives), a restore overwrites them in place. Used by the
// training thread.
class State : public hvd::elastic::State {
 public:
  // Any torch::optim optimizer, hvd::torch::DistributedOptimizer included (it is one).
  State(::torch::nn::Module& model, ::torch::optim::Optimizer& optimizer);

  // Tracks a value by reference: a commit saves it, a restore writes it back. T is a
  // bool, integer, floating-point type, std::string, at::Tensor, or std::vector of int64_t or
  // double. Returns *this for chaining.
  template <class T>
  State& track(const std::string& name, T& value) {
    static_assert(!std::is_const_v<T>, "track a variable the restore can write");
    add(name, [&value] { return c10::IValue(value); },
        [&value](const c10::IValue& v) { value = from_ivalue<T>(v); });
    return *this;
  }
  State& track(const std::string& name, hvd::elastic::ElasticSampler& sampler);

 protected:
  std::string serialize() const override;
  void deserialize(const std::string& bytes) override;

 private:
  struct Tracked {
    std::string name;
    std::function<c10::IValue()> get;
    std::function<void(const c10::IValue&)> set;
  };
  void add(const std::string& name, std::function<c10::IValue()> get,
           std::function<void(const c10::IValue&)> set);

  template <class T>
  static T from_ivalue(const c10::IValue& v) {
    if constexpr (std::is_same_v<T, bool>) return v.toBool();
    else if constexpr (std::is_integral_v<T>) return static_cast<T>(v.toInt());
    else if constexpr (std::is_floating_point_v<T>) return static_cast<T>(v.toDouble());
    else if constexpr (std::is_same_v<T, at::Tensor>) return v.toTensor();
    else return v.to<T>();
  }

  ::torch::nn::Module& model_;
  ::torch::optim::Optimizer& optimizer_;
  std::vector<Tracked> tracked_;
};

}  // namespace hvd::torch::elastic
