// The handles of operations not yet completed, kept weakly so that the watchdog can fail them
// all when the background thread is stuck (it will never complete them). User threads add;
// the watchdog thread fails. Thread-safe; owned by the Runtime.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "core/handle_state.h"
#include "core/status.h"

namespace hvd::detail {

class LiveHandles {
 public:
  void track(const std::shared_ptr<HandleState>& state);
  // Completes every tracked handle still pending with `status` and forgets them all.
  void fail_all(const Status& status);

 private:
  std::mutex mutex_;
  std::vector<std::weak_ptr<HandleState>> handles_;
  std::size_t prune_at_ = 64;  // completed ones are dropped when the list reaches this
};

}  // namespace hvd::detail
