// hvd::torch::DistributedOptimizer: a torch::optim::Optimizer that averages gradients across
// ranks, or combines the ranks' updates with Adasum. Included by horovodcpp/torch.h.
#pragma once

#include <torch/optim/optimizer.h>
#include <torch/ordered_dict.h>
#include <torch/version.h>

#include <memory>
#include <string>
#include <type_traits>

#include "horovodcpp/horovod.h"

namespace hvd::torch {
namespace detail {
class GradientReducer;
}

using NamedTensors = ::torch::OrderedDict<std::string, at::Tensor>;

// When the gradients' allreduces start.
enum class GradientOverlap {
  // DuringBackward, except for host (CPU) gradients while this host's ranks already fill its
  // cores with computation (local ranks x LibTorch threads >= the cores this process may use,
  // as of construction): AfterBackward for those. There the communication competes with
  // backward for the same cores, and overlapping it costs more than it hides.
  Auto,
  DuringBackward,  // each one as soon as backward has produced its gradient (Horovod, DDP)
  AfterBackward,   // all together, fused, when the backward pass ends
};

struct DistributedOptimizerOptions {
  // Backward passes accumulated locally before the gradients are reduced. Passes beyond it
  // before step() are still correct: the accumulated gradient is reduced again (op Adasum
  // refuses them: the local step is taken).
  int backward_passes_per_step = 1;
  // FP16: floating gradients (op Adasum: the parameters' changes) travel as float16
  Compression compression = Compression::None;
  ReduceOp op = ReduceOp::Average;  // Average, Sum, or Adasum (see "Adasum" below)
  double gradient_predivide_factor = 1.0;  // Average only: sum(g / f) * f / size
  // Prefix of the gradients' collective names ("<name>.<parameter name>"): the same on every
  // rank. Two optimizers whose allreduces can be in flight together need different names.
  std::string name = "DistributedOptimizer";
  // The ranks that average gradients together (default: every rank). Ranks of other sets run
  // their own optimizers at the same time (several data-parallel groups in one job); a rank
  // outside the set cannot construct it.
  ProcessSet process_set{};
  GradientOverlap overlap = GradientOverlap::Auto;
};

// LibTorch's own default for zero_grad(): 1.x zeroes the gradients, 2.x resets them.
#if TORCH_VERSION_MAJOR >= 2
constexpr bool kZeroGradSetsToNone = true;
#else
constexpr bool kZeroGradSetsToNone = false;
#endif

// A torch::optim::Optimizer that wraps another one. Hooks on the parameters' gradient
// accumulators start each gradient's allreduce as soon as backward has produced it (or, per
// DistributedOptimizerOptions::overlap, all of them when the pass ends); when the backward pass
// ends, it waits for them and writes the averaged gradients back (as PyTorch's DDP does), so
// code between backward() and step() (clipping, logging) sees reduced gradients.
//
// It is an Optimizer: pass it wherever LibTorch takes an `Optimizer&` (LR schedulers,
// torch::save/torch::load, your own train functions). The wrapped optimizer's param groups and
// state live in this object, so `param_groups()`, `state()`, `add_param_group()`, options and
// schedulers act on what the wrapped optimizer steps with; its archives are the wrapped
// optimizer's, so a checkpoint loads into a plain optimizer of the same class and back.
//
// zero_grad() forgets: through this class, the base class, or `module->zero_grad()`, gradients
// of a backward pass that was never stepped on (a generator's backward through a
// discriminator, a partial accumulation) are discarded, the same on every rank.
//
// Adasum (op = ReduceOp::Adasum), Horovod's Adasum optimizer: each rank steps the wrapped
// optimizer on its own gradients, one parameter at a time as backward completes its
// accumulation (overlap DuringBackward; Auto means DuringBackward here), or in step() for all of
// them (AfterBackward: then gradient clipping between backward() and step() counts). The
// parameter is put back, and its change goes out in an Adasum allreduce named
// "<name>.<parameter name>"; step() sets every parameter to its old value plus the combined
// change, the same on every rank. Gradients and the wrapped optimizer's state (momentum, Adam's
// moments) stay each rank's own. synchronize() does nothing; zero_grad() is refused once a
// parameter's passes are complete (until step()), and so is a gradient beyond
// backward_passes_per_step. Refused at construction: a process set of a size that is not a power
// of two, gradient_predivide_factor, LBFGS (it needs a closure), parameters that are not
// float16, bfloat16, float32 or float64. The wrapped optimizer must update each parameter from
// its own gradient and state (every LibTorch optimizer but LBFGS does).
//
// Used by the training thread; the hooks run on autograd's threads. Movable, not copyable. At
// size 1 it registers no hooks and steps the wrapped optimizer directly.
class DistributedOptimizer : public ::torch::optim::Optimizer {
 public:
  DistributedOptimizer(std::unique_ptr<::torch::optim::Optimizer> optimizer, const NamedTensors& named_parameters,
                       const DistributedOptimizerOptions& options = {});
  // Takes a concrete optimizer by value: DistributedOptimizer(torch::optim::SGD(...), ...).
  template <class Opt, std::enable_if_t<!std::is_lvalue_reference_v<Opt> &&
                                            std::is_base_of_v<::torch::optim::Optimizer, std::decay_t<Opt>> &&
                                            !std::is_same_v<std::decay_t<Opt>, DistributedOptimizer>,
                                        int> = 0>
  DistributedOptimizer(Opt&& optimizer, const NamedTensors& named_parameters,
                       const DistributedOptimizerOptions& options = {})
      : DistributedOptimizer(std::make_unique<std::decay_t<Opt>>(std::move(optimizer)), named_parameters, options) {}
  DistributedOptimizer(DistributedOptimizer&&) noexcept;
  DistributedOptimizer& operator=(DistributedOptimizer&&) noexcept;
  ~DistributedOptimizer() override;

  // Reduces what was not reduced yet (parameters whose hooks did not fire take part with
  // zeros; a partial accumulation is reduced as it is), then the wrapped optimizer's step. With
  // a closure (LBFGS), each evaluation of it is followed by a synchronize().
  at::Tensor step(LossClosure closure = nullptr) override;
  void save(::torch::serialize::OutputArchive& archive) const override;
  void load(::torch::serialize::InputArchive& archive) override;

  // Waits for every gradient allreduce in flight, starts those that were not, and writes the
  // reduced gradients back. step() calls it; backward's end already did it in the usual loop.
  // Nothing with op Adasum (step() combines the updates).
  void synchronize();
  // Forgets every gradient not yet stepped on and zeroes (or, with set_to_none, resets) the
  // gradients of the parameters this optimizer updates.
  void zero_grad(bool set_to_none = kZeroGradSetsToNone);

  // This object as an Optimizer (it holds the param groups and state), for code written against
  // the earlier wrapper API.
  ::torch::optim::Optimizer& optimizer() { return *this; }
  const ::torch::optim::Optimizer& optimizer() const { return *this; }
  // The wrapped optimizer, for its class; its param groups and state are lent to it only while
  // it steps, saves or loads.
  const ::torch::optim::Optimizer& wrapped() const;
  const DistributedOptimizerOptions& options() const;
  // Gradient allreduces started and not yet written back.
  std::size_t pending_allreduces() const;

 private:
  std::unique_ptr<::torch::optim::Optimizer> wrapped_;  // steps with this object's groups and state
  std::unique_ptr<detail::GradientReducer> reducer_;
};

}  // namespace hvd::torch
