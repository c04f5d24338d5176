// The Adasum mode's local steps, deltas and refusals (see adasum_deltas.h).
#include "adasum_deltas.h"

#include <torch/optim/lbfgs.h>

#include <utility>

namespace hvd::torch::detail {
namespace {
constexpr const char* kWho = "DistributedOptimizer (op Adasum)";
}  // namespace

OnlyParameter::OnlyParameter(std::vector<::torch::optim::OptimizerParamGroup>& groups, const at::Tensor& param)
    : groups_(groups) {
  // Everything that allocates comes first: once the swaps start, nothing can throw half-way.
  std::vector<std::vector<at::Tensor>> narrowed(groups.size());
  for (std::size_t g = 0; g < groups.size(); ++g)
    for (const auto& p : groups[g].params())
      if (p.is_same(param)) narrowed[g].push_back(p);
  whole_.resize(groups.size());
  for (std::size_t g = 0; g < groups.size(); ++g) {
    whole_[g] = std::move(groups[g].params());
    groups[g].params() = std::move(narrowed[g]);
  }
}

OnlyParameter::~OnlyParameter() {
  for (std::size_t g = 0; g < whole_.size(); ++g) groups_[g].params() = std::move(whole_[g]);
}

void check_adasum_set(const ProcessSet& process_set, bool device_parameters) {
  const int n = process_set.size();
  if ((n & (n - 1)) && !(device_parameters && process_set.id() == 0))
    throw Error(std::string(kWho) + ": Adasum needs a power-of-two number of ranks, and " + process_set.describe() +
                " (the DistributedOptimizerOptions::process_set) has " + std::to_string(n));
}

void check_adasum_optimizer(const ::torch::optim::Optimizer& optimizer) {
  if (dynamic_cast<const ::torch::optim::LBFGS*>(&optimizer) != nullptr)
    throw Error(std::string(kWho) + ": LBFGS cannot be wrapped: Adasum steps the wrapped optimizer one parameter at "
                "a time, without a closure, and LBFGS needs a closure over the whole model (use op Average or Sum)");
}

void check_adasum_parameter(const at::Tensor& param, const std::string& name) {
  const at::ScalarType t = param.scalar_type();
  if (t != at::kHalf && t != at::kBFloat16 && t != at::kFloat && t != at::kDouble)
    throw Error(std::string(kWho) + ": parameter '" + name + "' is " + c10::toString(t) +
                "; Adasum combines float16, bfloat16, float32 and float64 tensors only");
}

at::Tensor AdasumDeltas::take(const at::Tensor& param, at::Tensor& start) const {
  at::NoGradGuard no_grad;
  if (!start.defined() || !start.sizes().equals(param.sizes()) || start.scalar_type() != param.scalar_type() ||
      start.device() != param.device())
    start = at::empty_like(param, at::MemoryFormat::Contiguous);
  start.copy_(param);
  // No gradient here: the wrapped optimizer would skip the parameter, and it takes part with zeros.
  if (!param.grad().defined()) return at::zeros_like(start);
  try {
    step_(param);
  } catch (...) {
    param.copy_(start);  // whatever the failed step wrote
    throw;
  }
  at::Tensor delta = param - start;  // a new tensor
  param.copy_(start);  // back where it was until step(): forward passes before it see the old values
  return delta;
}

void AdasumDeltas::apply(const at::Tensor& param, at::Tensor& start, const at::Tensor& combined) {
  at::NoGradGuard no_grad;
  // From the copy rather than the parameter, so nothing written to the parameter between take()
  // and step() leaks into the result (as in Horovod).
  start.add_(combined.view_as(start));
  param.copy_(start);
}

}  // namespace hvd::torch::detail
