// Reads a Chrome trace (JSON array or {"traceEvents": [...]}) tolerantly: a file cut short by
// kill -9 or Ctrl-C -- missing its closing "]", or ending inside an event -- yields every event
// before the cut, with a note. Malformed text before the end is an error. Tool-side only.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "timeline/json.h"

namespace hvd::timeline {

// A trace that cannot be read: the message names the file and, where one is at fault, the event.
class TraceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TraceFile {
  std::string path;
  std::vector<JsonValue> events;
  bool complete = true;     // false: the closing bracket was missing or an event was cut short
  std::string note;         // what was cut short, for the user
  std::optional<int> rank;  // from the "hvd_timeline" metadata event, when present
  std::optional<std::int64_t> start_wall_us;
  std::optional<std::uint64_t> dropped_events;  // the last "hvd_dropped_events" metadata
};

TraceFile read_trace_text(const std::string& text, const std::string& path);
TraceFile read_trace_file(const std::string& path);  // throws TraceError if unreadable

// Small accessors shared by check, summary and merge.
std::string string_field(const JsonValue& event, const char* key);  // "" when absent
std::optional<double> number_field(const JsonValue& event, const char* key);
// An args member as a number: JSON numbers, or strings holding one ("1200").
std::optional<double> numeric_arg(const JsonValue& event, const char* key);

}  // namespace hvd::timeline
