// Merges per-rank traces (HOROVOD_TIMELINE_ALL_RANKS=1 writes PATH.rankN) into one trace with a
// row group (process, pid rank + 1) per rank and, inside it, a row (thread) per tensor. Each
// group's runtime row is tid 1; tensors follow from tid 2 and keep the same tid in every group so
// a straggler stands out. No pid or tid is 0: Perfetto treats pid 0 as the idle process and has
// merged tids 0 and 1. Each rank's clock is shifted by its recorded wall-clock start so the
// groups line up on one clock. An "hvd_rank_group" metadata event names each group's rank.
// Begin/end pairs are written as complete events (trace_nesting.h), so merging even one file
// repairs it for viewers: an older file's unnamed ends, or a crashed run's torn tail.
// Tool-side only.
#pragma once

#include <string>
#include <vector>

#include "timeline/trace_file.h"

namespace hvd::timeline {

constexpr int kMergedRuntimeTid = 1;
inline int merged_pid(int rank) { return rank + 1; }

// Ranks come from each file's "hvd_timeline" metadata (else the file's position). Throws
// TraceError when two files claim the same rank.
std::vector<JsonValue> merge_traces(const std::vector<TraceFile>& traces);
// Writes events as a JSON array, one event per line.
void write_trace(const std::vector<JsonValue>& events, const std::string& path);

}  // namespace hvd::timeline
