// GradientReducer: its parameters' slots, the hooks that see each gradient complete and start its
// allreduce, and the end-of-backward callback. The reduction round itself: gradient_round.cc.
#include "gradient_reducer.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/variable.h>

#include <ATen/Parallel.h>
#include <sched.h>

#include <algorithm>
#include <thread>

#include "held_gradient_names.h"
#include "tensor_adapter.h"

namespace hvd::torch::detail {
namespace {

constexpr const char* kWho = "DistributedOptimizer";

void check_options(const DistributedOptimizerOptions& o) {
  if (o.name.empty())
    throw Error(std::string(kWho) + ": DistributedOptimizerOptions::name must not be empty (it prefixes the "
                "gradients' collective names)");
  if (o.backward_passes_per_step < 1)
    throw Error(std::string(kWho) + ": backward_passes_per_step must be at least 1, got " +
                std::to_string(o.backward_passes_per_step));
  if (o.op != ReduceOp::Average && o.op != ReduceOp::Sum && o.op != ReduceOp::Adasum)
    throw Error(std::string(kWho) + ": op must be Average, Sum or Adasum, got " + reduce_op_name(o.op));
  if (!(o.gradient_predivide_factor > 0.0))
    throw Error(std::string(kWho) + ": gradient_predivide_factor must be positive, got " +
                std::to_string(o.gradient_predivide_factor));
  if (o.gradient_predivide_factor != 1.0 && o.op != ReduceOp::Average)
    throw Error(std::string(kWho) + ": gradient_predivide_factor " + std::to_string(o.gradient_predivide_factor) +
                " needs op Average (it splits the averaging into a pre- and a post-scale)");
}

// Whether the ranks on this host keep all the cores this process may use busy computing: a
// rank pinned to fewer cores than the host has is taken to have them to itself.
bool host_cores_full() {
  const int online = static_cast<int>(std::thread::hardware_concurrency());
  int usable = online;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) usable = CPU_COUNT(&set);
  if (usable <= 0) return false;
  const int sharing = online > 0 && usable < online ? 1 : hvd::local_size();
  return static_cast<long>(sharing) * at::get_num_threads() >= usable;
}

}  // namespace

GradientReducer::GradientReducer(const NamedTensors& named_parameters, const DistributedOptimizerOptions& options,
                                 const std::vector<::torch::optim::OptimizerParamGroup>& groups)
    : options_(options) {
  check_options(options_);
  if (!options_.process_set.included())
    throw Error(std::string(kWho) + ": rank " + std::to_string(hvd::rank()) + " is not in " +
                options_.process_set.describe() + ", the DistributedOptimizerOptions::process_set");
  size_ = options_.process_set.size();
  if (options_.op == ReduceOp::Adasum) deltas_ = std::make_unique<AdasumDeltas>();
  // Adasum takes Auto as DuringBackward: with local steps, whether code between backward() and
  // step() (clipping) changes the update depends on the overlap, and must not differ by host.
  host_cores_full_ = options_.overlap == GradientOverlap::Auto && !deltas_ && host_cores_full();
  wire_options_.process_set = options_.process_set;
  wire_options_.op = options_.op;
  wire_options_.prescale_factor = 1.0 / options_.gradient_predivide_factor;
  wire_options_.postscale_factor = options_.gradient_predivide_factor;
  round_options_.process_set = options_.process_set;
  round_options_.op = ReduceOp::Max;
  round_options_.name = options_.name + "#round";
  described_.optimizer = options_.name;
  std::unordered_set<std::string> seen;
  for (const auto& item : named_parameters) {
    if (!item.value().defined())
      throw Error(std::string(kWho) + ": named parameter '" + item.key() + "' is undefined");
    if (!seen.insert(item.key()).second)
      throw Error(std::string(kWho) + ": parameter name '" + item.key() + "' appears twice in named_parameters");
    named_twice_ = !names_.emplace(item.value().unsafeGetTensorImpl(), named_.size()).second || named_twice_;
    named_.push_back(item.value());
    ParameterEntry e;
    e.name = item.key();
    described_.entries.push_back(std::move(e));
  }
  described_sizes_.resize(named_.size());
  described_dtypes_.resize(named_.size(), at::ScalarType::Undefined);
  // The ranks compare these parameters in every round of reductions, the first included, before
  // any gradient of it is written back: not here, since ranks may build different numbers of
  // optimizers (an extra one on one rank), and a collective here could not be matched.
  try {
    refresh(groups);
    if (deltas_)
      check_adasum_set(options_.process_set,
                       std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.param.is_cuda(); }));
  } catch (...) {
    detach();  // no destructor runs: the hooks and held names of the slots made so far go now
    throw;
  }
}

// Names each trainable parameter of the param groups from named_parameters (by identity).
void GradientReducer::refresh(const std::vector<::torch::optim::OptimizerParamGroup>& groups) {
  std::size_t unnamed = 0;
  std::string first_unnamed;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    for (std::size_t i = 0; i < groups[g].params().size(); ++i) {
      const at::Tensor& p = groups[g].params()[i];
      if (!p.defined() || !p.requires_grad() || known_.count(p.unsafeGetTensorImpl())) continue;
      auto it = names_.find(p.unsafeGetTensorImpl());
      if (it == names_.end()) {
        if (unnamed++ == 0)
          first_unnamed = "parameter " + std::to_string(i) + " of param group " + std::to_string(g) + " (shape " +
                          shape_string(TensorShape(p.sizes().begin(), p.sizes().end())) + ")";
        continue;
      }
      add_slot(p, it->second);
    }
  }
  if (unnamed > 0)
    throw Error(std::string(kWho) + ": " + std::to_string(unnamed) + " trainable parameter(s) of the optimizer, " +
                "first " + first_unnamed + ", are not in the named_parameters it was given; pass the model's "
                "named_parameters() (all of them, frozen ones too) so every rank names each gradient the same");
  std::lock_guard<std::mutex> lock(mutex_);
  renew_replaced_accumulators();
}

void GradientReducer::add_slot(const at::Tensor& param, std::size_t named_index) {
  const std::string& name = described_.entries[named_index].name;
  if (!param.is_leaf())
    throw Error(std::string(kWho) + ": parameter '" + name +
                "' is not a leaf tensor (it was computed from other tensors); parameters must be leaves");
  if (deltas_) check_adasum_parameter(param, name);
  std::lock_guard<std::mutex> lock(mutex_);
  Slot slot;
  slot.name = name;
  slot.collective = wire_options_;
  slot.collective.name = options_.name + "." + name;
  slot.param = param;
  slots_.push_back(std::move(slot));
  known_.insert(param.unsafeGetTensorImpl());
  // Every name of this tensor describes it as this slot.
  const int index = static_cast<int>(slots_.size() - 1);
  described_.entries[named_index].slot = index;
  if (named_twice_)
    for (std::size_t i = named_index + 1; i < named_.size(); ++i)
      if (named_[i].is_same(param)) described_.entries[i].slot = index;
  described_stale_ = true;
  // At size 1 there is nothing to reduce: no hooks, and step() is the wrapped step.
  if (size_ > 1) register_hooks(slots_.size() - 1);
}

void GradientReducer::register_hooks(std::size_t index) {
  Slot& slot = slots_[index];
  try {
    slot.accumulator = ::torch::autograd::impl::grad_accumulator(slot.param);
  } catch (const std::exception& e) {
    throw Error(std::string(kWho) + ": parameter '" + slot.name + "' has no gradient accumulator (" + e.what() +
                "); parameters must be leaf tensors");
  }
  if (!slot.accumulator) throw Error(std::string(kWho) + ": parameter '" + slot.name + "' has no gradient accumulator");
  slot.hooked_sizes = slot.param.sizes().vec();
  slot.hooked_dtype = slot.param.scalar_type();
  slot.hooked_device = slot.param.device();
  // Autograd only holds the accumulator weakly: slot.accumulator keeps it (and the hooks) alive.
  auto check = std::make_unique<BeforeGradient>(this, index);
  slot.pre_hook = check.get();
  slot.accumulator->add_pre_hook(std::move(check));
  slot.hook_key = slot.accumulator->add_post_hook(std::make_unique<AfterGradient>(this, index));
}

void GradientReducer::unhook(Slot& slot) {
  if (!slot.accumulator) return;
  slot.accumulator->del_post_hook(slot.hook_key);
  auto& pre = slot.accumulator->pre_hooks();
  pre.erase(std::remove_if(pre.begin(), pre.end(), [&](const auto& h) { return h.get() == slot.pre_hook; }),
            pre.end());
  slot.pre_hook = nullptr;
}

// Note [A parameter's data replaced]
// set_data() with another dtype or device (module->to() after the optimizer was built) makes
// autograd drop its weak reference to the parameter's gradient accumulator and build a new one,
// without our hooks: the gradients then reach synchronize() only, at step(). With another shape
// (a layer grown in place) autograd keeps the old accumulator, since we hold it, and refuses the
// new gradient against the shape it recorded ("returned an invalid gradient"). So at zero_grad()
// and step() such a parameter's hooks move to a fresh accumulator; once the last graph that used
// the old one is gone, autograd builds the fresh one for the new data. (Compared with what the
// parameter was, not by asking autograd for its accumulator: that takes a lock per parameter, at
// every step.)
void GradientReducer::renew_replaced_accumulators() {
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    Slot& slot = slots_[i];
    if (!slot.accumulator) continue;
    if (slot.param.sizes().equals(slot.hooked_sizes) && slot.param.scalar_type() == slot.hooked_dtype &&
        slot.param.device() == slot.hooked_device)
      continue;
    unhook(slot);
    slot.accumulator.reset();
    register_hooks(i);
  }
}

GradientReducer::~GradientReducer() { detach(); }

void GradientReducer::detach() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& slot : slots_) unhook(slot);
  discard_in_flight();  // the runtime writes into slot.wire until each completes
  for (auto& slot : slots_) release(slot);
  slots_.clear();
}

// A gradient that someone zeroed or reset since the last pass (zero_grad() of this optimizer,
// of the base class, or module->zero_grad()) starts a new accumulation.
void GradientReducer::before_gradient(std::size_t index) {
  std::lock_guard<std::mutex> lock(mutex_);
  Slot& slot = slots_[index];
  if (slot.passes == 0) return;
  const at::Tensor& grad = slot.param.grad();
  if (!grad.defined() || grad.unsafeGetTensorImpl() != slot.seen_grad || grad._version() != slot.seen_version)
    slot.passes = 0;
}

void GradientReducer::on_gradient(std::size_t index) {
  std::lock_guard<std::mutex> lock(mutex_);
  Slot& slot = slots_[index];
  // A local step cannot take a later gradient back in (Horovod refuses this too). claimed, not
  // the handle: the same on every rank whatever the overlap.
  if (deltas_ && slot.claimed)
    throw Error(std::string(kWho) + " (op Adasum): parameter '" + slot.name + "' got a gradient after its " +
                std::to_string(options_.backward_passes_per_step) +
                " backward pass(es) of this step were complete (backward_passes_per_step " +
                std::to_string(options_.backward_passes_per_step) + "), before step(); raise "
                "backward_passes_per_step to accumulate more passes locally");
  ++slot.passes;
  slot.reduced = false;
  const at::Tensor& grad = slot.param.grad();
  slot.seen_grad = grad.defined() ? grad.unsafeGetTensorImpl() : nullptr;
  slot.seen_version = grad.defined() ? grad._version() : -1;
  if (slot.passes < options_.backward_passes_per_step) return;
  if (starts_after_backward(grad))
    claim(slot);  // held for the end of the pass (Adasum: for step())
  else
    start_allreduce(slot);
  if (deltas_) return;  // step() waits for the combined updates, not the end of the pass
  // Runs once this backward pass has finished, on the thread that ran it (and starts what waited
  // for the end of the pass). Queued per completed gradient rather than once per pass: a pass
  // that fails never runs its callbacks, and no flag may be left saying one is queued; the later
  // callbacks of a pass find nothing left to do.
  ::torch::autograd::Engine::get_default_engine().queue_callback([this] { finish_backward(); });
}

// The end of a backward pass that completed an accumulation: every other trainable parameter
// joins (with zeros when it has no gradient, so ranks that used different parameters still
// reduce the same set), and the reduced gradients are written back before backward() returns.
void GradientReducer::finish_backward() {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string failure = reduce_all();
  if (model_differs_) throw Error(failure);
  if (!failure.empty())
    throw Error(std::string(kWho) + ": " + failure +
                " (the gradients that failed stay unreduced; step() retries them and does not step before)");
}

bool GradientReducer::starts_after_backward(const at::Tensor& grad) const {
  switch (options_.overlap) {
    case GradientOverlap::DuringBackward: return false;
    case GradientOverlap::AfterBackward: return true;
    case GradientOverlap::Auto: break;
  }
  return host_cores_full_ && grad.defined() && grad.device().is_cpu();
}

void GradientReducer::claim(Slot& slot) {
  if (slot.claimed) return;
  if (!HeldGradientNames::instance().claim(slot.collective.name, this))
    throw Error("allreduce '" + slot.collective.name + "' of " + std::string(kWho) + " gradient '" + slot.name +
                "' is already in flight (another optimizer took it and has not written it back yet). " +
                same_name_advice(options_.name));
  slot.claimed = true;
}

void GradientReducer::release(Slot& slot) {
  if (!slot.claimed) return;
  HeldGradientNames::instance().release(slot.collective.name, this);
  slot.claimed = false;
}

void GradientReducer::bind_local_step(LocalStep step) {
  if (deltas_) deltas_->bind(std::move(step));
}

at::Tensor GradientReducer::outgoing_gradient(Slot& slot) {
  if (slot.handle.valid()) {
    // Reduced once already in this step and accumulated onto since: the earlier result is
    // superseded by the reduction of the whole accumulation.
    try {
      slot.handle.wait();
    } catch (const std::exception&) {
    }
    slot.handle = hvd::Handle();
  }
  // A parameter without a gradient (unused this step) still takes part, with zeros, so the
  // ranks that did compute one are not left waiting.
  if (!slot.param.grad().defined()) slot.param.mutable_grad() = at::zeros_like(slot.param);
  const at::Tensor grad = slot.param.grad();
  static const std::string what = std::string(kWho) + " gradient";
  detail::to_hvd_dtype(grad.scalar_type(), what, slot.name);
  if (grad.is_sparse()) throw Error(what + " of '" + slot.name + "': sparse gradients are not supported");
  return grad;
}

void GradientReducer::start_allreduce(Slot& slot) {
  claim(slot);  // until write_back() or discard_in_flight() has its result
  at::NoGradGuard no_grad;
  // Adasum: on_gradient() refuses a gradient for a slot whose delta is out, so none is here.
  const at::Tensor payload = deltas_ ? deltas_->take(slot.param, slot.start) : outgoing_gradient(slot);
  if (options_.compression == Compression::FP16 && payload.is_floating_point() && payload.scalar_type() != at::kHalf)
    slot.wire = payload.to(at::kHalf, false, false, at::MemoryFormat::Contiguous);
  else
    slot.wire = payload.is_contiguous() ? payload : payload.contiguous();
  auto wire = detail::wrap(slot.wire);
  try {
    slot.handle = hvd::allreduce_async(wire, wire, slot.collective, detail::ready_event(slot.wire));
  } catch (const Error& e) {
    slot.wire = at::Tensor();
    release(slot);
    const std::string message = e.what();
    if (message.find("already in flight") == std::string::npos) throw;
    throw Error(message + ". " + same_name_advice(options_.name));
  }
}

bool GradientReducer::all_reduced() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::all_of(slots_.begin(), slots_.end(), [this](const Slot& s) { return s.reduced || !takes_part(s); });
}

void GradientReducer::after_step() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& slot : slots_) {
    slot.reduced = false;
    slot.passes = 0;
  }
}

void GradientReducer::forget() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (deltas_) {
    std::size_t stepped = 0;
    const Slot* first = nullptr;
    for (const auto& slot : slots_)
      if (slot.claimed && stepped++ == 0) first = &slot;
    if (stepped > 0)
      throw Error(std::string(kWho) + "::zero_grad() (op Adasum): " + std::to_string(stepped) +
                  " parameter(s), first '" + first->name + "', completed backward_passes_per_step " +
                  std::to_string(options_.backward_passes_per_step) +
                  " backward pass(es) since the last step(), so their local step is taken or due and "
                  "cannot be forgotten; call step() before zero_grad()");
  }
  discard_in_flight();
  for (auto& slot : slots_) {
    release(slot);
    slot.reduced = false;
    slot.passes = 0;
  }
  renew_replaced_accumulators();
}

std::size_t GradientReducer::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::size_t n = 0;
  for (const auto& slot : slots_) n += slot.handle.valid() ? 1 : 0;
  return n;
}

}  // namespace hvd::torch::detail
