// Reads spans the way viewers nest them, whatever form a file holds them in: complete events
// ("ph":"X" with "dur", what horovodcpp writes now), begin/end pairs (what a span still open when
// it was written becomes, and what older files hold throughout, their ends often unnamed), or
// both on one row. Tool-side only.
#pragma once

#include <string>
#include <vector>

#include "timeline/trace_file.h"

namespace hvd::timeline {

// The events in file order with every X replaced by a B (its name, args and ts) and a matching
// E placed, on its row (pid, tid), after everything that nests inside it: one begin/end form
// for summary and last-ready to walk. Metadata and other events pass unchanged. An X that starts
// where an enclosing span ends is that span's child only when it has no duration.
std::vector<JsonValue> nested_events(const std::vector<JsonValue>& events);

// Rewrites begin/end pairs as complete events (X at the begin's place; the end's args merged over
// the begin's): what merge writes, so that old files and spans spilled as B/E open correctly in
// every viewer. A B never closed stays a B (its span was still open when the file ended).
std::vector<JsonValue> complete_events(const std::vector<JsonValue>& events);

// "pid/tid" of an event, as printed.
std::string row_key(const JsonValue& event);

}  // namespace hvd::timeline
