// GradientReducer: the hooks, the end-of-backward callback and the per-parameter reductions.
#include "gradient_reducer.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/variable.h>

#include <ATen/Parallel.h>
#include <sched.h>

#include <algorithm>
#include <optional>
#include <thread>

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

// The gradients' collective names an optimizer has taken, process-wide: from the hook that holds
// one for the end of the pass or starts its allreduce until the pass writes it back (or it is
// discarded). Two optimizers of one name taking the same gradient name in one pass would each
// reduce it, in an order that may differ between ranks: each reduced with the other's gradient.
// Refused here, in program order, so every rank refuses the same one; the runtime's own "already
// in flight" refusal depends on whether the first allreduce has completed yet, which differs
// between ranks (one rank refused, the other submitted twice, and a later pass's gradient was
// reduced with the refused pass's).
class HeldNames {
 public:
  bool claim(const std::string& name, const void* owner) {
    std::lock_guard<std::mutex> lock(mutex_);
    return held_.emplace(name, owner).first->second == owner;
  }
  void release(const std::string& name, const void* owner) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = held_.find(name);
    if (it != held_.end() && it->second == owner) held_.erase(it);
  }

 private:
  std::mutex mutex_;
  std::unordered_map<std::string, const void*> held_;
};

HeldNames& held_names() {
  static HeldNames names;
  return names;
}

std::string same_name_advice(const std::string& optimizer_name) {
  return "Another DistributedOptimizer named '" + optimizer_name +
         "' has this parameter's allreduce in flight: give each optimizer its own DistributedOptimizerOptions::name";
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
  // Autograd only holds the accumulator weakly: slot.accumulator keeps it (and the hooks) alive.
  auto check = std::make_unique<BeforeGradient>(this, index);
  slot.pre_hook = check.get();
  slot.accumulator->add_pre_hook(std::move(check));
  slot.hook_key = slot.accumulator->add_post_hook(std::make_unique<AfterGradient>(this, index));
}

GradientReducer::~GradientReducer() { detach(); }

void GradientReducer::detach() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& slot : slots_) {
    if (!slot.accumulator) continue;
    slot.accumulator->del_post_hook(slot.hook_key);
    auto& pre = slot.accumulator->pre_hooks();
    pre.erase(std::remove_if(pre.begin(), pre.end(), [&](const auto& h) { return h.get() == slot.pre_hook; }),
              pre.end());
  }
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
  if (!held_names().claim(slot.collective.name, this))
    throw Error("allreduce '" + slot.collective.name + "' of " + std::string(kWho) + " gradient '" + slot.name +
                "' is already in flight (another optimizer took it and has not written it back yet). " +
                same_name_advice(options_.name));
  slot.claimed = true;
}

void GradientReducer::release(Slot& slot) {
  if (!slot.claimed) return;
  held_names().release(slot.collective.name, this);
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

std::string GradientReducer::reduce_all() {
  model_differs_ = false;
  const bool round = std::any_of(slots_.begin(), slots_.end(), [this](const Slot& s) {
    return s.handle.valid() || (!s.reduced && takes_part(s));
  });
  if (!round) return {};
  // The round's one small allreduce (op Max), after the gradients: for each parameter this rank
  // fills with zeros, whether any rank had a gradient for it; then the digest of this rank's
  // parameters (see Note [A model that differs between ranks fails on every rank]).
  const std::int64_t n = static_cast<std::int64_t>(slots_.size());
  at::Tensor check = at::zeros({n + 2}, at::kLong);
  std::int64_t* here = check.data_ptr<std::int64_t>();
  std::vector<bool> filled(slots_.size(), false);
  std::string failure;
  // The round's allreduces reach the background thread together and start a cycle at once.
  std::optional<hvd::SubmissionBatch> batch;
  try {
    batch.emplace();
  } catch (const Error&) {
    // Stopped: each allreduce below fails on its own, naming its parameter.
  }
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    Slot& slot = slots_[i];
    if (!takes_part(slot)) continue;
    here[i] = slot.param.grad().defined() ? 1 : 0;
    if (slot.reduced || slot.handle.valid()) continue;
    filled[i] = !deltas_ && !slot.param.grad().defined();
    try {
      start_allreduce(slot);
    } catch (const std::exception& e) {
      if (failure.empty()) failure = e.what();  // names the parameter
    }
  }
  describe_parameters();
  const auto digest = digest_words(described_digest_, described_);
  here[n] = digest[0];
  here[n + 1] = digest[1];
  auto check_wire = wrap(check);
  hvd::Handle check_handle = hvd::allreduce_async(check_wire, check_wire, round_options_);
  batch.reset();
  // The check first: when the ranks' parameters differ, some gradients below never complete.
  std::string check_failure;
  try {
    check_handle.wait();
  } catch (const std::exception& e) {
    check_failure = e.what();
  }
  if (!check_failure.empty() || !same_digest_everywhere({here[n], here[n + 1]})) {
    return fail_round(described_, check_failure.empty() ? std::string("the parameter check of this round failed")
                                                  : "the parameter check of this round failed: " + check_failure);
  }
  const std::string wait_failure = write_back();
  // `here` now holds, per parameter, whether any rank had a gradient. No rank had one: leave it
  // undefined, as one process would, so the optimizer skips the parameter instead of stepping it
  // with zeros (momentum, weight decay).
  for (std::size_t i = 0; i < slots_.size(); ++i)
    if (filled[i] && here[i] == 0 && slots_[i].reduced) slots_[i].param.mutable_grad().reset();
  return failure.empty() ? wait_failure : failure;
}

// Every round, so a parameter changed in place (set_data() to another dtype or shape,
// requires_grad_()) is described as it is now; comparing costs no allocation.
void GradientReducer::describe_parameters() {
  for (std::size_t i = 0; i < named_.size(); ++i) {
    const at::Tensor& param = named_[i];
    ParameterEntry& e = described_.entries[i];
    if (param.scalar_type() != described_dtypes_[i] || !param.sizes().equals(described_sizes_[i]) ||
        param.requires_grad() != e.requires_grad) {
      described_dtypes_[i] = param.scalar_type();
      described_sizes_[i].assign(param.sizes().begin(), param.sizes().end());
      e.dtype = c10::toString(param.scalar_type());
      e.shape = shape_string(TensorShape(param.sizes().begin(), param.sizes().end()));
      e.requires_grad = param.requires_grad();
      described_stale_ = true;
    }
    e.in_flight = e.slot >= 0 && slots_[static_cast<std::size_t>(e.slot)].handle.valid();
  }
  if (described_stale_) {
    described_digest_ = static_digest(described_);
    described_stale_ = false;
  }
}

std::string GradientReducer::fail_round(const ParameterList& mine, const std::string& fallback) {
  std::string difference, unexchanged;
  std::vector<ParameterList> lists;
  try {
    lists = gather_parameters(mine, options_.process_set, options_.name + "#parameters");
    difference = describe_difference(lists, options_.process_set.ranks());
  } catch (const std::exception& e) {
    unexchanged = std::string(" (and the ranks' parameter lists could not be compared: ") + e.what() + ")";
  }
  model_differs_ = !difference.empty();
  const std::string message = model_differs_ ? difference : fallback + unexchanged;
  // Gradients some rank has in flight that this rank will never submit: withdrawn, so the ranks
  // waiting for them fail with this message. See Note [A collective one rank cannot run fails on
  // every rank] (core/api.cc).
  std::unordered_set<std::string> own;
  for (const auto& e : mine.entries)
    if (e.in_flight) own.insert(e.name);
  std::unordered_set<std::string> withdrawn;
  std::vector<hvd::Handle> withdrawals;
  for (const auto& list : lists)
    for (const auto& e : list.entries)
      if (e.in_flight && !own.count(e.name) && withdrawn.insert(e.name).second) {
        try {
          withdrawals.push_back(hvd::withdraw(list.optimizer + "." + e.name, message, options_.process_set));
        } catch (const std::exception&) {
          // In flight here under another optimizer, or stopped: nothing more to tell.
        }
      }
  discard_in_flight();  // this rank's own: they complete (or fail) now
  for (auto& h : withdrawals) {
    try {
      h.wait();
    } catch (const std::exception&) {
      // Fails by design, with `message`.
    }
  }
  return message;
}

// A slot counts as reduced only when its allreduce succeeded; a failed one is retried by the
// next synchronize() (or step()), which never steps on an unreduced gradient.
std::string GradientReducer::write_back() {
  std::string failure;
  at::NoGradGuard no_grad;
  for (auto& slot : slots_) {
    if (!slot.handle.valid()) continue;
    try {
      slot.handle.wait();
      if (deltas_) {
        AdasumDeltas::apply(slot.param, slot.start, slot.wire);
      } else {
        at::Tensor grad = slot.param.grad();
        if (!slot.wire.is_same(grad)) grad.copy_(slot.wire);  // decompress / un-contiguous
      }
      slot.reduced = true;
      slot.passes = 0;
    } catch (const std::exception& e) {
      if (failure.empty()) failure = (deltas_ ? "update of '" : "gradient of '") + slot.name + "': " + e.what();
    }
    slot.handle = hvd::Handle();
    slot.wire = at::Tensor();
    release(slot);
  }
  return failure;
}

void GradientReducer::discard_in_flight() {
  for (auto& slot : slots_) {
    if (!slot.handle.valid()) continue;
    try {
      slot.handle.wait();
    } catch (const std::exception&) {
      // A failed reduction that is being discarded: every rank's runtime already reported it.
    }
    slot.handle = hvd::Handle();
    slot.wire = at::Tensor();
    release(slot);
  }
}

void GradientReducer::synchronize() {
  if (size_ == 1) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string failure = reduce_all();
  if (model_differs_) throw Error(failure);
  if (!failure.empty() && deltas_)
    throw Error(std::string(kWho) + "::step() (op Adasum): " + failure +
                " (the parameters whose update failed keep their values from before this step; the wrapped "
                "optimizer's state for them, e.g. momentum, has taken this step's local update)");
  if (!failure.empty())
    throw Error(std::string(kWho) + "::synchronize(): " + failure +
                " (the gradients that failed stay unreduced; step() retries them and does not step before)");
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
}

std::size_t GradientReducer::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::size_t n = 0;
  for (const auto& slot : slots_) n += slot.handle.valid() ? 1 : 0;
  return n;
}

}  // namespace hvd::torch::detail
