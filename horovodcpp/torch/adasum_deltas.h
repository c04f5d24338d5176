// DistributedOptimizer's Adasum mode (DistributedOptimizerOptions::op = ReduceOp::Adasum), as
// Horovod's Adasum optimizer: each rank steps the wrapped optimizer on its own gradients, one
// parameter at a time, and what the ranks combine with Adasum is the parameter's change (its
// delta), not its gradient. Adasum needs each rank's whole update: it weighs the updates by their
// dot products, which an average of gradients taken before the optimizer's scaling would lose.
// The GradientReducer decides when a parameter goes (its hooks, or step()); this file says what
// goes and what becomes of the result. Internal to the torch front end.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include <functional>
#include <string>
#include <vector>

#include "horovodcpp/torch.h"

namespace hvd::torch::detail {

// Steps the wrapped optimizer on one parameter alone (DistributedOptimizer gives it; see
// OnlyParameter).
using LocalStep = std::function<void(const at::Tensor& param)>;

// Narrows every param group to `param` for the lifetime of this object, and puts the groups back
// even when the step throws. LibTorch's optimizers keep their per-parameter state (momentum
// buffers, Adam's step count and moments) keyed by the parameter's TensorImpl and update each
// parameter from its own gradient and state only, so stepping the parameters one by one leaves
// the same state and values as one step of all of them. The group's options (learning rate, a
// scheduler's changes) stay the group's own.
class OnlyParameter {
 public:
  OnlyParameter(std::vector<::torch::optim::OptimizerParamGroup>& groups, const at::Tensor& param);
  ~OnlyParameter();
  OnlyParameter(const OnlyParameter&) = delete;
  OnlyParameter& operator=(const OnlyParameter&) = delete;

 private:
  std::vector<::torch::optim::OptimizerParamGroup>& groups_;
  std::vector<std::vector<at::Tensor>> whole_;  // each group's parameters while narrowed
};

// Refusals that name what Adasum cannot do, thrown at construction (the same on every rank).
// Adasum pairs ranks up a binary tree, so their number must be a power of two: checked here where
// the ranks are the tree's leaves, in a process set or for host parameters. Device tensors of the
// global set combine across nodes instead (README, "Adasum"): the runtime names a wrong count
// when the first update goes out.
void check_adasum_set(const ProcessSet& process_set, bool device_parameters);
void check_adasum_optimizer(const ::torch::optim::Optimizer& optimizer);
void check_adasum_parameter(const at::Tensor& param, const std::string& name);

// The per-parameter work of the Adasum mode. Used under the GradientReducer's mutex.
class AdasumDeltas {
 public:
  void bind(LocalStep step) { step_ = std::move(step); }
  // Takes `param`'s local step (none when it has no gradient: zeros) and returns its change, a
  // new tensor (made contiguous where it travels, as a gradient is); `param` is left where it was, and `start` (allocated on first use,
  // then reused) keeps a copy of that until apply().
  at::Tensor take(const at::Tensor& param, at::Tensor& start) const;
  // `param` becomes where it was before its local step plus the ranks' combined change.
  static void apply(const at::Tensor& param, at::Tensor& start, const at::Tensor& combined);

 private:
  LocalStep step_;
};

}  // namespace hvd::torch::detail
