// Merges per-rank traces (HOROVOD_TIMELINE_ALL_RANKS=1 writes PATH.rankN) into one trace with a
// row group (process) per rank and, inside it, a row (thread) per tensor. A tensor keeps the same
// row number in every group so a straggler stands out, and each rank's clock is shifted by its
// recorded wall-clock start so the groups line up. Tool-side only.
#pragma once

#include <string>
#include <vector>

#include "timeline/trace_file.h"

namespace hvd::timeline {

// Ranks come from each file's "hvd_timeline" metadata (else the file's position). Throws
// TraceError when two files claim the same rank.
std::vector<JsonValue> merge_traces(const std::vector<TraceFile>& traces);
// Writes events as a JSON array, one event per line.
void write_trace(const std::vector<JsonValue>& events, const std::string& path);

}  // namespace hvd::timeline
