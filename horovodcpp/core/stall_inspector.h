// Watches the coordinator's message table for tensors that some ranks submitted and others
// have not. After HOROVOD_STALL_CHECK_TIME_SECONDS it logs one warning per tensor naming the
// missing ranks; after HOROVOD_STALL_SHUTDOWN_TIME_SECONDS (> 0) it reports the stall as fatal.
// Used by the Controller on the coordinator, background thread only.
#pragma once

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "core/settings.h"

namespace hvd::detail {

// From HOROVOD_STALL_CHECK_DISABLE, _CHECK_TIME_SECONDS and _SHUTDOWN_TIME_SECONDS; a
// default-constructed one holds their declared defaults.
struct StallOptions {
  StallOptions() : StallOptions(default_settings()) {}
  explicit StallOptions(const Settings& settings)
      : enabled(!settings.stall_check_disabled),
        warning_seconds(settings.stall_check_seconds),
        shutdown_seconds(settings.stall_shutdown_seconds) {}

  bool enabled;
  double warning_seconds;
  double shutdown_seconds;  // 0: never fatal
};

struct StalledTensor {
  std::string name;
  std::vector<int> missing_ranks;  // global ranks
  std::string process_set;         // empty for the global set, else "process set 1 (ranks [2, 3])"
  double waited_seconds = 0;
};

class StallInspector {
 public:
  explicit StallInspector(StallOptions options) : options_(options) {}

  // Called with every pending table entry. Returns the message of a fatal stall, or empty.
  // Logs a warning once per tensor when it passes the warning time.
  std::string inspect(const std::vector<StalledTensor>& pending);
  void forget(const std::string& name) { warned_.erase(name); }
  const StallOptions& options() const { return options_; }
  static std::string describe(const StalledTensor& stalled);

 private:
  StallOptions options_;
  std::set<std::string> warned_;
};

}  // namespace hvd::detail
