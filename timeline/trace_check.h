// Checks a trace against the Trace Event format rules that Chrome and Perfetto rely on: the
// fields each phase needs, B/E nesting per row (pid, tid) and timestamps that never go back on a
// row. Spans still open at the end are warnings (a recording read mid-run or after a crash).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "timeline/trace_file.h"

namespace hvd::timeline {

struct CheckResult {
  bool ok = true;
  std::size_t bad_index = 0;  // the first bad event, when !ok
  std::string message;        // "event 12 (ph E, pid 3): ..." when !ok
  std::vector<std::string> warnings;
  std::size_t rows = 0;  // distinct (pid, tid) rows holding timed events
};

CheckResult check_trace(const TraceFile& trace);

}  // namespace hvd::timeline
