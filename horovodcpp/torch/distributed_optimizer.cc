// DistributedOptimizer: per-parameter hooks on the gradient accumulators start each gradient's
// allreduce while backward still runs; step() collects them and steps the inner optimizer.
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "horovodcpp/torch.h"
#include "tensor_adapter.h"

namespace hvd::torch {
namespace {

constexpr const char* kWho = "DistributedOptimizer";

void check_options(const DistributedOptimizerOptions& o) {
  if (o.name.empty())
    throw Error(std::string(kWho) + ": DistributedOptimizerOptions::name must not be empty (it prefixes the "
                "gradients' collective names)");
  if (o.backward_passes_per_step < 1)
    throw Error(std::string(kWho) + ": backward_passes_per_step must be at least 1, got " +
                std::to_string(o.backward_passes_per_step));
  if (o.op != ReduceOp::Average && o.op != ReduceOp::Sum)
    throw Error(std::string(kWho) + ": op must be Average or Sum, got " + reduce_op_name(o.op));
  if (!(o.gradient_predivide_factor > 0.0))
    throw Error(std::string(kWho) + ": gradient_predivide_factor must be positive, got " +
                std::to_string(o.gradient_predivide_factor));
  if (o.gradient_predivide_factor != 1.0 && o.op != ReduceOp::Average)
    throw Error(std::string(kWho) + ": gradient_predivide_factor " + std::to_string(o.gradient_predivide_factor) +
                " needs op Average (it splits the averaging into a pre- and a post-scale)");
}

}  // namespace

// Owns the inner optimizer, the accumulators (kept alive so their hooks fire) and each
// parameter's pending allreduce. Hooks run on autograd's threads; the rest on the training
// thread; mutex_ guards the slots.
class DistributedOptimizer::Impl {
 public:
  Impl(std::unique_ptr<::torch::optim::Optimizer> optimizer, const NamedTensors& named_parameters,
       const DistributedOptimizerOptions& options);
  ~Impl();
  void synchronize();
  void step();
  void zero_grad();
  std::size_t pending() const;
  ::torch::optim::Optimizer& optimizer() { return *optimizer_; }
  const DistributedOptimizerOptions& options() const { return options_; }

 private:
  // One parameter that takes part: its names, its accumulator and its allreduce in flight.
  struct Slot {
    std::string name;       // the user's parameter name
    std::string wire_name;  // the collective's name: options.name + "." + name
    at::Tensor param;
    std::shared_ptr<::torch::autograd::Node> accumulator;
    std::uintptr_t hook_key = 0;
    const ::torch::autograd::FunctionPreHook* pre_hook = nullptr;  // owned by the accumulator
    int passes = 0;  // backward passes seen since the last synchronize
    bool reduced = false;  // param.grad() holds the reduced gradient (until the next pass or step)
    at::Tensor wire;  // what travels: the gradient itself, a contiguous or a float16 copy
    hvd::Handle handle;
  };

  // Runs before the accumulator writes param.grad(): refuses a pass beyond
  // backward_passes_per_step while that gradient's allreduce may still be reading it.
  class PassCheck final : public ::torch::autograd::FunctionPreHook {
   public:
    PassCheck(Impl* impl, std::size_t index) : impl_(impl), index_(index) {}
    ::torch::autograd::variable_list operator()(const ::torch::autograd::variable_list& grads) override {
      impl_->before_gradient(index_);
      return grads;
    }

   private:
    Impl* impl_;
    std::size_t index_;
  };

  // Runs after the accumulator has written param.grad().
  class GradientHook final : public ::torch::autograd::FunctionPostHook {
   public:
    GradientHook(Impl* impl, std::size_t index) : impl_(impl), index_(index) {}
    ::torch::autograd::variable_list operator()(const ::torch::autograd::variable_list& outputs,
                                                const ::torch::autograd::variable_list&) override {
      impl_->on_gradient(index_);
      return outputs;
    }

   private:
    Impl* impl_;
    std::size_t index_;
  };

  void add_slots(const NamedTensors& named_parameters);
  void register_hooks();
  void before_gradient(std::size_t index);
  void on_gradient(std::size_t index);
  void start_allreduce(Slot& slot);  // mutex_ held
  std::string write_back();          // mutex_ held; returns the first failure
  bool all_reduced() const;          // mutex_ held

  std::unique_ptr<::torch::optim::Optimizer> optimizer_;
  DistributedOptimizerOptions options_;
  AllreduceOptions wire_options_;
  std::vector<Slot> slots_;
  int size_;
  mutable std::mutex mutex_;
};

DistributedOptimizer::Impl::Impl(std::unique_ptr<::torch::optim::Optimizer> optimizer,
                                 const NamedTensors& named_parameters, const DistributedOptimizerOptions& options)
    : optimizer_(std::move(optimizer)), options_(options), size_(hvd::size()) {
  if (!optimizer_) throw Error(std::string(kWho) + ": the inner optimizer is null");
  check_options(options_);
  wire_options_.op = options_.op;
  wire_options_.prescale_factor = 1.0 / options_.gradient_predivide_factor;
  wire_options_.postscale_factor = options_.gradient_predivide_factor;
  add_slots(named_parameters);
  // At size 1 there is nothing to reduce: no hooks, and step() is the inner step.
  if (size_ > 1) register_hooks();
}

// Names each of the inner optimizer's parameters from named_parameters (by identity).
void DistributedOptimizer::Impl::add_slots(const NamedTensors& named_parameters) {
  std::unordered_map<const void*, std::string> names;
  std::unordered_set<std::string> seen;
  for (const auto& item : named_parameters) {
    if (!item.value().defined())
      throw Error(std::string(kWho) + ": named parameter '" + item.key() + "' is undefined");
    if (!seen.insert(item.key()).second)
      throw Error(std::string(kWho) + ": parameter name '" + item.key() + "' appears twice in named_parameters");
    names.emplace(item.value().unsafeGetTensorImpl(), item.key());
  }
  const std::string prefix = options_.name + ".";
  std::unordered_set<const void*> added;
  std::size_t unnamed = 0;
  for (const auto& group : optimizer_->param_groups()) {
    for (const auto& p : group.params()) {
      if (!p.defined() || !p.requires_grad() || !added.insert(p.unsafeGetTensorImpl()).second) continue;
      auto it = names.find(p.unsafeGetTensorImpl());
      if (it == names.end()) {
        ++unnamed;
        continue;
      }
      if (!p.is_leaf())
        throw Error(std::string(kWho) + ": parameter '" + it->second +
                    "' is not a leaf tensor (it was computed from other tensors); parameters must be leaves");
      Slot slot;
      slot.name = it->second;
      slot.wire_name = prefix + it->second;
      slot.param = p;
      slots_.push_back(std::move(slot));
    }
  }
  if (unnamed > 0)
    throw Error(std::string(kWho) + ": " + std::to_string(unnamed) +
                " parameter(s) of the inner optimizer are not in named_parameters; pass the model's "
                "named_parameters() for every parameter the optimizer updates");
}

void DistributedOptimizer::Impl::register_hooks() {
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    Slot& slot = slots_[i];
    try {
      slot.accumulator = ::torch::autograd::impl::grad_accumulator(slot.param);
    } catch (const std::exception& e) {
      throw Error(std::string(kWho) + ": parameter '" + slot.name + "' has no gradient accumulator (" + e.what() +
                  "); parameters must be leaf tensors");
    }
    if (!slot.accumulator)
      throw Error(std::string(kWho) + ": parameter '" + slot.name + "' has no gradient accumulator");
    // Autograd only holds the accumulator weakly: slot.accumulator keeps it (and the hooks) alive.
    auto check = std::make_unique<PassCheck>(this, i);
    slot.pre_hook = check.get();
    slot.accumulator->add_pre_hook(std::move(check));
    slot.hook_key = slot.accumulator->add_post_hook(std::make_unique<GradientHook>(this, i));
  }
}

DistributedOptimizer::Impl::~Impl() {
  for (auto& slot : slots_) {
    if (slot.accumulator) {
      slot.accumulator->del_post_hook(slot.hook_key);
      auto& pre = slot.accumulator->pre_hooks();
      pre.erase(std::remove_if(pre.begin(), pre.end(), [&](const auto& h) { return h.get() == slot.pre_hook; }),
                pre.end());
    }
    if (!slot.handle.valid()) continue;
    try {
      slot.handle.wait();  // the runtime still writes into slot.wire until then
    } catch (const std::exception&) {
      // Destruction cannot report it; the failure already reached every rank's runtime.
    }
  }
}

// Throws before the extra pass touches param.grad(), so an allreduce in flight on it (and the
// result a following step() uses) stays intact.
void DistributedOptimizer::Impl::before_gradient(std::size_t index) {
  std::lock_guard<std::mutex> lock(mutex_);
  const Slot& slot = slots_[index];
  const int allowed = options_.backward_passes_per_step;
  if (slot.passes >= allowed)
    throw Error(std::string(kWho) + ": the gradient of '" + slot.name + "' was computed " +
                std::to_string(slot.passes + 1) + " times before step(), but backward_passes_per_step is " +
                std::to_string(allowed) + "; call step() after every " + std::to_string(allowed) +
                " backward pass(es) or raise backward_passes_per_step (this pass was not accumulated)");
}

void DistributedOptimizer::Impl::on_gradient(std::size_t index) {
  std::lock_guard<std::mutex> lock(mutex_);
  Slot& slot = slots_[index];
  ++slot.passes;
  slot.reduced = false;
  if (slot.passes == options_.backward_passes_per_step) start_allreduce(slot);
}

void DistributedOptimizer::Impl::start_allreduce(Slot& slot) {
  at::NoGradGuard no_grad;
  // A parameter without a gradient (unused this step) still takes part, with zeros, so the
  // ranks that did compute one are not left waiting.
  if (!slot.param.grad().defined()) slot.param.mutable_grad() = at::zeros_like(slot.param);
  const at::Tensor grad = slot.param.grad();
  const std::string what = std::string(kWho) + " gradient";
  detail::to_hvd_dtype(grad.scalar_type(), what, slot.name);
  if (grad.is_sparse()) throw Error(what + " of '" + slot.name + "': sparse gradients are not supported");
  if (options_.compression == Compression::FP16 && grad.is_floating_point() && grad.scalar_type() != at::kHalf)
    slot.wire = grad.to(at::kHalf, false, false, at::MemoryFormat::Contiguous);
  else
    slot.wire = grad.is_contiguous() ? grad : grad.contiguous();
  AllreduceOptions o = wire_options_;
  o.name = slot.wire_name;
  auto wire = detail::wrap(slot.wire);
  try {
    slot.handle = hvd::allreduce_async(wire, wire, o, detail::ready_event(slot.wire));
  } catch (const Error& e) {
    slot.wire = at::Tensor();
    const std::string message = e.what();
    if (message.find("already in flight") == std::string::npos) throw;
    throw Error(message + ". Another DistributedOptimizer named '" + options_.name +
                "' has this parameter's allreduce in flight: give each optimizer its own "
                "DistributedOptimizerOptions::name");
  }
}

// A slot counts as reduced only when its allreduce succeeded; a failed one is retried by the
// next synchronize() (or step()), which never steps on an unreduced gradient.
std::string DistributedOptimizer::Impl::write_back() {
  std::string failure;
  at::NoGradGuard no_grad;
  for (auto& slot : slots_) {
    if (slot.handle.valid()) {
      try {
        slot.handle.wait();
        at::Tensor grad = slot.param.grad();
        if (!slot.wire.is_same(grad)) grad.copy_(slot.wire);  // decompress / un-contiguous
        slot.reduced = true;
      } catch (const std::exception& e) {
        if (failure.empty()) failure = "gradient of '" + slot.name + "': " + e.what();
      }
    }
    slot.handle = hvd::Handle();
    slot.wire = at::Tensor();
    slot.passes = 0;
  }
  return failure;
}

void DistributedOptimizer::Impl::synchronize() {
  if (size_ == 1) return;
  std::lock_guard<std::mutex> lock(mutex_);
  std::string failure;
  for (auto& slot : slots_) {
    if (slot.reduced || slot.handle.valid()) continue;
    try {
      start_allreduce(slot);
    } catch (const std::exception& e) {
      if (failure.empty()) failure = e.what();  // names the parameter
    }
  }
  const std::string wait_failure = write_back();
  if (failure.empty()) failure = wait_failure;
  if (!failure.empty())
    throw Error(std::string(kWho) + "::synchronize(): " + failure +
                " (the gradients that failed stay unreduced; step() retries them and does not step before)");
}

bool DistributedOptimizer::Impl::all_reduced() const {
  return std::all_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.reduced; });
}

void DistributedOptimizer::Impl::step() {
  if (size_ > 1) {
    bool done;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done = all_reduced();
    }
    if (!done) synchronize();
  }
  optimizer_->step();
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& slot : slots_) slot.reduced = false;
}

// Horovod's rule: zero_grad() between backward and step() would race the allreduces in flight
// or silently drop a partial accumulation (backward_passes_per_step > 1).
void DistributedOptimizer::Impl::zero_grad() {
  std::size_t in_flight = 0, partial = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& slot : slots_) {
      if (slot.handle.valid()) ++in_flight;
      else if (slot.passes > 0) ++partial;
    }
  }
  if (in_flight > 0)
    throw Error(std::string(kWho) + "::zero_grad(): " + std::to_string(in_flight) +
                " gradient allreduce(s) started by backward are still pending; call step() or synchronize() "
                "before zero_grad()");
  if (partial > 0)
    throw Error(std::string(kWho) + "::zero_grad(): " + std::to_string(partial) +
                " gradient(s) hold a partial accumulation (fewer than backward_passes_per_step = " +
                std::to_string(options_.backward_passes_per_step) +
                " backward passes) that would be lost; call step() or synchronize() before zero_grad()");
  optimizer_->zero_grad();
}

std::size_t DistributedOptimizer::Impl::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::size_t n = 0;
  for (const auto& slot : slots_) n += slot.handle.valid() ? 1 : 0;
  return n;
}

DistributedOptimizer::DistributedOptimizer(std::unique_ptr<::torch::optim::Optimizer> optimizer,
                                           const NamedTensors& named_parameters,
                                           const DistributedOptimizerOptions& options)
    : impl_(std::make_unique<Impl>(std::move(optimizer), named_parameters, options)) {}
DistributedOptimizer::DistributedOptimizer(DistributedOptimizer&&) noexcept = default;
DistributedOptimizer& DistributedOptimizer::operator=(DistributedOptimizer&&) noexcept = default;
DistributedOptimizer::~DistributedOptimizer() = default;

void DistributedOptimizer::synchronize() { impl_->synchronize(); }
void DistributedOptimizer::step() { impl_->step(); }
void DistributedOptimizer::zero_grad() { impl_->zero_grad(); }
::torch::optim::Optimizer& DistributedOptimizer::optimizer() { return impl_->optimizer(); }
const ::torch::optim::Optimizer& DistributedOptimizer::optimizer() const { return impl_->optimizer(); }
const DistributedOptimizerOptions& DistributedOptimizer::options() const { return impl_->options(); }
std::size_t DistributedOptimizer::pending_allreduces() const { return impl_->pending(); }

void broadcast_optimizer_state(DistributedOptimizer& optimizer, int root) {
  broadcast_optimizer_state(optimizer.optimizer(), root);
}

}  // namespace hvd::torch
