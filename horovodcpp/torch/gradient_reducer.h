// The per-parameter machinery behind DistributedOptimizer (see GradientReducer). Internal to
// the torch front end.
#pragma once

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "adasum_deltas.h"
#include "horovodcpp/torch.h"
#include "parameter_agreement.h"

namespace hvd::torch::detail {

// The owning pointer to a gradient accumulator, as impl::grad_accumulator returns it:
// std::shared_ptr<Node> up to PyTorch 2.12, c10::intrusive_ptr<Node> from 2.13 on (pytorch#181782).
// Both keep the accumulator, and so its hooks, alive.
using AccumulatorPtr = decltype(::torch::autograd::impl::grad_accumulator(std::declval<const at::Tensor&>()));

// Reduces the gradients of a set of named parameters across ranks while backward runs: hooks
// on each parameter's gradient accumulator start its allreduce as soon as the gradient is
// complete (unless options.overlap holds it to the end of the pass), and a callback at the end of the backward pass waits for them and writes the
// reduced gradients back. Owns the accumulators (autograd holds them only weakly, and their
// hooks fire only while someone holds them). Owned by a DistributedOptimizer; hooks and the
// callback run on autograd's threads, the rest on the training thread; mutex_ guards the slots.
// With op Adasum what travels is each parameter's change under a local step instead (see
// adasum_deltas.h): a parameter goes when its gradient is complete as above, the rest go in
// synchronize(), which applies the combined changes; nothing waits at the end of the pass.
class GradientReducer {
 public:
  GradientReducer(const NamedTensors& named_parameters, const DistributedOptimizerOptions& options,
                  const std::vector<::torch::optim::OptimizerParamGroup>& groups);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;
  // Adasum mode: how to step the wrapped optimizer on one parameter (again after a move).
  void bind_local_step(LocalStep step);
  bool combines_updates() const { return deltas_ != nullptr; }
  // Picks up parameters added by add_param_group() or unfrozen since the last call, and
  // parameters whose data set_data() replaced (Note [A parameter's data replaced]).
  void refresh(const std::vector<::torch::optim::OptimizerParamGroup>& groups);
  // Starts what was not started (zeros for parameters without a gradient), waits for every
  // allreduce and writes the results back; throws hvd::Error naming the first failure.
  void synchronize();
  // Every trainable parameter holds its reduced gradient.
  bool all_reduced() const;
  // The optimizer stepped: the next backward pass starts a new accumulation.
  void after_step();
  // zero_grad(): waits for (and drops) reductions in flight and starts a new accumulation, and
  // renews replaced parameters' accumulators as refresh does. Adasum mode refuses it once a
  // parameter has completed its accumulation: its local step is taken.
  void forget();
  std::size_t pending() const;
  const DistributedOptimizerOptions& options() const { return options_; }
  int size() const { return size_; }

 private:
  // One parameter that takes part: its names, its accumulator and its allreduce in flight.
  // Built once, when the parameter joins; the per-round work only reads what is here.
  struct Slot {
    std::string name;  // the user's parameter name
    // wire_options_ with the collective's name, options.name + "." + name (the name the ranks
    // negotiate and the timeline shows)
    AllreduceOptions collective;
    at::Tensor param;
    AccumulatorPtr accumulator;
    // The parameter's shape, dtype and device when the accumulator was taken: autograd checks
    // gradients against the shape, and replaces the accumulator on another dtype or device.
    std::vector<std::int64_t> hooked_sizes;
    at::ScalarType hooked_dtype = at::ScalarType::Undefined;
    at::Device hooked_device = at::kCPU;
    std::uintptr_t hook_key = 0;
    const ::torch::autograd::FunctionPreHook* pre_hook = nullptr;  // owned by the accumulator
    int passes = 0;        // backward passes accumulated locally since the last reduction
    // param.grad() holds the reduced gradient (Adasum: param holds its combined update), until
    // the next pass or step
    bool reduced = false;
    // The gradient as the last pass left it: a different tensor or version at the next pass
    // means someone zeroed or reset it in between.
    const void* seen_grad = nullptr;
    std::int64_t seen_version = -1;
    at::Tensor wire;  // what travels: the gradient itself, a contiguous or a float16 copy (Adasum: the delta)
    at::Tensor start;  // Adasum: the parameter before its local step (AdasumDeltas::take)
    hvd::Handle handle;
    // Its collective name taken (held for the end of the pass, or started): its accumulation is
    // complete for this step.
    bool claimed = false;
  };

  // Runs before the accumulator writes param.grad().
  class BeforeGradient final : public ::torch::autograd::FunctionPreHook {
   public:
    BeforeGradient(GradientReducer* impl, std::size_t index) : impl_(impl), index_(index) {}
    ::torch::autograd::variable_list operator()(const ::torch::autograd::variable_list& grads) override {
      impl_->before_gradient(index_);
      return grads;
    }

   private:
    GradientReducer* impl_;
    std::size_t index_;
  };

  // Runs after the accumulator has written param.grad().
  class AfterGradient final : public ::torch::autograd::FunctionPostHook {
   public:
    AfterGradient(GradientReducer* impl, std::size_t index) : impl_(impl), index_(index) {}
    ::torch::autograd::variable_list operator()(const ::torch::autograd::variable_list& outputs,
                                                const ::torch::autograd::variable_list&) override {
      impl_->on_gradient(index_);
      return outputs;
    }

   private:
    GradientReducer* impl_;
    std::size_t index_;
  };

  void add_slot(const at::Tensor& param, std::size_t named_index);
  // Removes the hooks, waits for what is in flight and gives the held names back: the
  // destructor, or a constructor that throws.
  void detach();
  void register_hooks(std::size_t index);  // mutex_ held
  void unhook(Slot& slot);                 // mutex_ held
  // mutex_ held: moves the hooks of parameters whose data set_data() replaced to fresh
  // accumulators (Note [A parameter's data replaced]).
  void renew_replaced_accumulators();
  void before_gradient(std::size_t index);
  void on_gradient(std::size_t index);
  void finish_backward();
  bool takes_part(const Slot& slot) const { return slot.param.requires_grad(); }
  // Whether this gradient's allreduce waits for the end of the backward pass (options_.overlap).
  bool starts_after_backward(const at::Tensor& grad) const;
  void claim(Slot& slot);    // mutex_ held; throws when another optimizer has taken the same name
  void release(Slot& slot);  // mutex_ held
  void start_allreduce(Slot& slot);  // mutex_ held
  // mutex_ held: the gradient to reduce (zeros when there is none), checked.
  at::Tensor outgoing_gradient(Slot& slot);
  // mutex_ held: starts what is not reduced or in flight (zeros where a parameter has no
  // gradient), waits for all and writes them back; returns the first failure ("" if none).
  std::string reduce_all();
  std::string write_back();          // mutex_ held; returns the first failure
  void discard_in_flight();          // mutex_ held
  // See Note [A model that differs between ranks fails on every rank] (parameter_agreement.h).
  // Brings described_ up to date (mutex_ held): the gradients in flight every round, an entry's
  // dtype, shape and requires_grad only when they changed, and the static digest then.
  void describe_parameters();
  // A round whose parameter check failed: every rank's lists compared, the gradients this rank
  // will never submit withdrawn, this rank's own discarded. Returns the message every rank throws
  // (or `fallback` when the lists cannot be exchanged). mutex_ held.
  std::string fail_round(const ParameterList& mine, const std::string& fallback);

  DistributedOptimizerOptions options_;
  AllreduceOptions wire_options_;
  AllreduceOptions round_options_;  // the round's check (reduce_all)
  std::unordered_map<const void*, std::size_t> names_;  // every named parameter, by identity: its first index
  std::vector<at::Tensor> named_;  // the same, in the order given
  bool named_twice_ = false;       // some tensor appears under two names
  // named_ as the ranks compare it: entries[i] describes named_[i]; its slots change when
  // parameters join, its in_flight every round, the rest when described_sizes_ and the dtype
  // and requires_grad beside it no longer match the tensor.
  ParameterList described_;
  std::vector<std::vector<std::int64_t>> described_sizes_;
  std::vector<at::ScalarType> described_dtypes_;
  std::uint64_t described_digest_ = 0;  // static_digest(described_), unless described_stale_
  bool described_stale_ = true;
  bool model_differs_ = false;  // the last failure was a parameter mismatch (thrown as it is)
  std::vector<Slot> slots_;
  std::unordered_set<const void*> known_;  // parameters that have a slot
  std::unique_ptr<AdasumDeltas> deltas_;  // op Adasum only
  int size_;
  bool host_cores_full_ = false;  // GradientOverlap::Auto's test, made at construction
  mutable std::mutex mutex_;
};

}  // namespace hvd::torch::detail
