// GradientReducer's reduction round: what the hooks did not start is started (zeros where a
// parameter has no gradient), the ranks' parameters are compared in the round's one small
// allreduce (Note [A model that differs between ranks fails on every rank]), and the results are
// written back. Runs at the end of a backward pass, or in synchronize() and step().
#include "gradient_reducer.h"

#include <optional>
#include <unordered_set>

#include "tensor_adapter.h"

namespace hvd::torch::detail {
namespace {

constexpr const char* kWho = "DistributedOptimizer";

}  // namespace

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

}  // namespace hvd::torch::detail
