#include "core/live_handles.h"

#include <algorithm>

namespace hvd::detail {

void LiveHandles::track(const std::shared_ptr<HandleState>& state) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (handles_.size() >= prune_at_) {
    handles_.erase(std::remove_if(handles_.begin(), handles_.end(),
                                  [](const std::weak_ptr<HandleState>& w) {
                                    auto s = w.lock();
                                    return !s || s->done();
                                  }),
                   handles_.end());
    prune_at_ = std::max<std::size_t>(64, 2 * handles_.size());
  }
  handles_.push_back(state);
}

void LiveHandles::fail_all(const Status& status) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& weak : handles_)
    if (auto state = weak.lock()) state->fail_all(status);
  handles_.clear();
}

}  // namespace hvd::detail
