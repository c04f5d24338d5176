// Names for operations the user did not name: "<prefix>.noname.<n>", n counting per prefix, so
// ranks that submit the same unnamed operations in the same order agree on their names.
// Thread-safe; owned by the Runtime.
#pragma once

#include <map>
#include <mutex>
#include <string>

namespace hvd::detail {

class GeneratedNames {
 public:
  std::string next(const std::string& prefix) {
    std::lock_guard<std::mutex> lock(mutex_);
    return prefix + ".noname." + std::to_string(counters_[prefix]++);
  }

 private:
  std::mutex mutex_;
  std::map<std::string, long long> counters_;
};

}  // namespace hvd::detail
