// DistributedOptimizer: the torch::optim::Optimizer facade. It holds the wrapped optimizer's
// param groups and state, lends them to it for step/save/load, and leaves the gradients (with op
// Adasum: the parameters' updates, adasum_deltas.h) to its GradientReducer.
#include <utility>

#include "gradient_reducer.h"
#include "horovodcpp/torch.h"

namespace hvd::torch {
namespace {

constexpr const char* kWho = "DistributedOptimizer";

std::unique_ptr<::torch::optim::OptimizerOptions> defaults_of(const ::torch::optim::Optimizer* optimizer) {
  if (optimizer == nullptr) throw Error(std::string(kWho) + ": the wrapped optimizer is null");
  return optimizer->defaults().clone();
}

// Lends the param groups and state held by `owner` to `wrapped` for one call (both swaps are
// O(1)), and takes them back even when the call throws. Swapping is symmetric, so a Lend with
// the arguments the other way round gives them back for a nested call.
class Lend {
 public:
  Lend(::torch::optim::Optimizer& owner, ::torch::optim::Optimizer& wrapped) : owner_(owner), wrapped_(wrapped) {
    swap();
  }
  ~Lend() { swap(); }
  Lend(const Lend&) = delete;
  Lend& operator=(const Lend&) = delete;

 private:
  void swap() {
    std::swap(owner_.param_groups(), wrapped_.param_groups());
    std::swap(owner_.state(), wrapped_.state());
  }
  ::torch::optim::Optimizer& owner_;
  ::torch::optim::Optimizer& wrapped_;
};

// Adasum's local step of one parameter: `self`'s groups narrowed to it, lent to `wrapped`. Bound
// to the object that holds the groups, so again after a move.
detail::LocalStep local_step(::torch::optim::Optimizer& self, ::torch::optim::Optimizer& wrapped) {
  return [&self, &wrapped](const at::Tensor& param) {
    detail::OnlyParameter only(self.param_groups(), param);
    Lend lend(self, wrapped);
    wrapped.step();
  };
}

}  // namespace

DistributedOptimizer::DistributedOptimizer(std::unique_ptr<::torch::optim::Optimizer> optimizer,
                                           const NamedTensors& named_parameters,
                                           const DistributedOptimizerOptions& options)
    : ::torch::optim::Optimizer(std::vector<::torch::optim::OptimizerParamGroup>{}, defaults_of(optimizer.get())),
      wrapped_(std::move(optimizer)) {
  // The wrapped optimizer's param groups and state move here; it borrows them back to step.
  std::swap(param_groups_, wrapped_->param_groups());
  std::swap(state_, wrapped_->state());
  if (options.op == ReduceOp::Adasum) detail::check_adasum_optimizer(*wrapped_);
  reducer_ = std::make_unique<detail::GradientReducer>(named_parameters, options, param_groups_);
  reducer_->bind_local_step(local_step(*this, *wrapped_));
}

DistributedOptimizer::DistributedOptimizer(DistributedOptimizer&& other) noexcept
    : ::torch::optim::Optimizer(std::move(other)),
      wrapped_(std::move(other.wrapped_)),
      reducer_(std::move(other.reducer_)) {
  if (reducer_) reducer_->bind_local_step(local_step(*this, *wrapped_));
}

DistributedOptimizer& DistributedOptimizer::operator=(DistributedOptimizer&& other) noexcept {
  param_groups_ = std::move(other.param_groups_);
  state_ = std::move(other.state_);
  defaults_ = std::move(other.defaults_);
  reducer_ = std::move(other.reducer_);
  wrapped_ = std::move(other.wrapped_);
  if (reducer_) reducer_->bind_local_step(local_step(*this, *wrapped_));
  return *this;
}

DistributedOptimizer::~DistributedOptimizer() = default;

at::Tensor DistributedOptimizer::step(LossClosure closure) {
  reducer_->refresh(param_groups_);
  if (reducer_->combines_updates() && reducer_->size() > 1) {
    // Adasum: the local steps are taken parameter by parameter (in the hooks, or here for the
    // rest); what is left is to combine and apply them. Once, closure or not, as in Horovod.
    at::Tensor loss = closure ? closure() : at::Tensor();
    try {
      reducer_->synchronize();
    } catch (...) {
      reducer_->after_step();  // the next step starts afresh (see the message)
      throw;
    }
    reducer_->after_step();
    return loss;
  }
  if (!closure) {
    if (reducer_->size() > 1 && !reducer_->all_reduced()) reducer_->synchronize();
    at::Tensor loss;
    {
      Lend lend(*this, *wrapped_);
      loss = wrapped_->step();
    }
    reducer_->after_step();
    return loss;
  }
  // Each evaluation runs with the param groups back here (the closure may call zero_grad() on
  // any Optimizer&) and ends with the gradients reduced.
  LossClosure reduced_closure = [this, &closure] {
    Lend give_back(*wrapped_, *this);  // the swap is symmetric: this undoes the outer lend
    at::Tensor loss = closure();
    synchronize();
    return loss;
  };
  at::Tensor loss;
  {
    Lend lend(*this, *wrapped_);
    loss = wrapped_->step(reduced_closure);
  }
  reducer_->after_step();
  return loss;
}

// Const in the base class; the param groups and state are lent out and back within the call.
void DistributedOptimizer::save(::torch::serialize::OutputArchive& archive) const {
  auto& self = const_cast<DistributedOptimizer&>(*this);
  Lend lend(self, *wrapped_);
  wrapped_->save(archive);
}

void DistributedOptimizer::load(::torch::serialize::InputArchive& archive) {
  Lend lend(*this, *wrapped_);
  wrapped_->load(archive);
}

void DistributedOptimizer::synchronize() {
  if (reducer_->combines_updates()) return;  // no gradients to reduce: step() combines the updates
  reducer_->refresh(param_groups_);
  reducer_->synchronize();
}

void DistributedOptimizer::zero_grad(bool set_to_none) {
  reducer_->forget();
  for (auto& group : param_groups_) {
    for (auto& p : group.params()) {
      if (!p.mutable_grad().defined()) continue;
      if (set_to_none) {
        p.mutable_grad().reset();
      } else {
        p.mutable_grad().detach_();
        p.mutable_grad().zero_();
      }
    }
  }
}

const ::torch::optim::Optimizer& DistributedOptimizer::wrapped() const { return *wrapped_; }
const DistributedOptimizerOptions& DistributedOptimizer::options() const { return reducer_->options(); }
std::size_t DistributedOptimizer::pending_allreduces() const { return reducer_->pending(); }

}  // namespace hvd::torch
