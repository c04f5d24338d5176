#include "core/stall_inspector.h"

#include <sstream>

#include "core/logging.h"
#include "core/message.h"

namespace hvd::detail {

std::string StallInspector::describe(const StalledTensor& stalled) {
  std::ostringstream out;
  out << "tensor '" << display_name(stalled.name) << "'";
  if (!stalled.process_set.empty()) out << " in " << stalled.process_set;
  out << " was submitted by some ranks but not by rank"
      << (stalled.missing_ranks.size() == 1 ? " " : "s ");
  for (std::size_t i = 0; i < stalled.missing_ranks.size(); ++i)
    out << (i ? ", " : "") << stalled.missing_ranks[i];
  out << " for " << static_cast<long long>(stalled.waited_seconds) << " s";
  return out.str();
}

std::string StallInspector::inspect(const std::vector<StalledTensor>& pending) {
  if (!options_.enabled) return {};
  std::string fatal;
  std::vector<const StalledTensor*> newly_warned;
  for (const auto& p : pending) {
    if (options_.shutdown_seconds > 0 && p.waited_seconds >= options_.shutdown_seconds) {
      fatal += (fatal.empty() ? "" : "; ") + describe(p);
      continue;
    }
    if (p.waited_seconds >= options_.warning_seconds && warned_.insert(p.name).second)
      newly_warned.push_back(&p);
  }
  if (!newly_warned.empty()) {
    std::string message = "stall detected: one or more ranks are not submitting tensors that others have:";
    for (const auto* p : newly_warned) message += "\n  " + describe(*p);
    message += "\n  (a rank may have diverged, finished early without hvd::join(), or be blocked)";
    log_warn(message);
  }
  if (!fatal.empty())
    return "stall shutdown after HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=" +
           std::to_string(static_cast<long long>(options_.shutdown_seconds)) + ": " + fatal;
  return {};
}

}  // namespace hvd::detail
