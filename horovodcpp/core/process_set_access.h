// What the public ProcessSet value holds, and how the core reaches it and the runtime (not part
// of the public API). ProcessSetIdentity is shared by every copy of one ProcessSet.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "horovodcpp/horovod.h"

namespace hvd::detail {

class Runtime;

struct ProcessSetIdentity {
  std::vector<int> ranks;    // as given (validated when registered)
  std::atomic<int> id{-1};   // -1: not registered (yet, or any more)
  std::atomic<bool> removed{false};
};

struct ProcessSetAccess {
  static std::shared_ptr<ProcessSetIdentity> identity(const ProcessSet& set) { return set.identity_; }
  static ProcessSet make(std::shared_ptr<ProcessSetIdentity> identity) {
    ProcessSet set;
    set.identity_ = std::move(identity);
    return set;
  }
};

// The running runtime, or hvd::Error naming `caller` (defined in lifecycle.cc).
Runtime& running_runtime(const std::string& caller);
// The runtime between hvd::init() and hvd::shutdown(), running or not.
Runtime& initialized_runtime_for(const std::string& caller);

// The id of the set an operation runs in; throws naming `op()` when the set is not registered
// (never, or removed) or this rank is not in it. `ranks`, when not null, gets the set's global
// ranks. `op` runs only to write an error, so a submission builds no message it does not throw.
int resolve_process_set(Runtime& runtime, const ProcessSet& set, const std::function<std::string()>& op,
                        std::vector<int>* ranks);

}  // namespace hvd::detail
