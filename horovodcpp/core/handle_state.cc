#include "core/handle_state.h"

#include "core/blocked_callers.h"

namespace hvd::detail {

bool HandleState::record_entry(int index, const Status& entry_status, TensorPtr output) {
  std::lock_guard<std::mutex> lock(mutex);
  if (pending <= 0) return false;  // completed already (e.g. failed at shutdown)
  if (!entry_status.is_ok() && status.is_ok()) status = entry_status;
  if (index >= 0 && index < static_cast<int>(outputs.size())) outputs[index] = std::move(output);
  return --pending == 0;
}

void HandleState::fail_all(const Status& failure) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (pending <= 0) return;
    if (status.is_ok()) status = failure;
    pending = 0;
  }
  cv.notify_all();
}

bool HandleState::done() const {
  std::lock_guard<std::mutex> lock(mutex);
  return pending <= 0;
}

Status HandleState::wait() const {
  std::unique_lock<std::mutex> lock(mutex);
  if (pending > 0) {
    BlockedCallers::Scope blocked;
    cv.wait(lock, [this] { return pending <= 0; });
  }
  return status;
}

}  // namespace hvd::detail

namespace hvd {

namespace {
void require_valid(const std::shared_ptr<detail::HandleState>& state) {
  if (!state) throw Error("hvd::Handle: this handle does not refer to an operation");
}
}  // namespace

bool Handle::poll() const {
  require_valid(state_);
  return state_->done();
}

void Handle::wait() const {
  require_valid(state_);
  auto status = state_->wait();
  if (!status.is_ok()) throw Error(status.message());
}

const std::vector<TensorPtr>& Handle::outputs() const {
  require_valid(state_);
  state_->wait();
  return state_->outputs;
}

const std::vector<std::int64_t>& Handle::received_splits() const {
  require_valid(state_);
  state_->wait();
  return state_->received_splits;
}

}  // namespace hvd
