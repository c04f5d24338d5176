#include "timeline/trace_file.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace hvd::timeline {
namespace {

void read_metadata(TraceFile& trace) {
  for (const auto& event : trace.events) {
    if (string_field(event, "ph") != "M") continue;
    const std::string name = string_field(event, "name");
    if (name == "hvd_timeline") {
      if (auto rank = numeric_arg(event, "rank")) trace.rank = static_cast<int>(*rank);
      if (auto wall = numeric_arg(event, "start_wall_us")) {
        trace.start_wall_us = static_cast<std::int64_t>(*wall);
      }
    } else if (name == "hvd_dropped_events") {
      if (auto count = numeric_arg(event, "count")) {
        trace.dropped_events = static_cast<std::uint64_t>(*count);
      }
    }
  }
}

[[noreturn]] void malformed(const TraceFile& trace, const std::string& what) {
  throw TraceError(trace.path + ": event " + std::to_string(trace.events.size()) +
                   ": malformed JSON: " + what);
}

// Reads the elements of the top-level array one at a time so that a tail cut short by a crash
// (the text simply stops) loses only itself. Anything else wrong is malformed: an error naming
// the event and the byte.
void read_array(JsonParser& parser, TraceFile& trace) {
  parser.advance();  // '['
  bool after_comma = false;
  for (;;) {
    parser.skip_space();
    if (parser.at_end()) {
      trace.complete = false;
      trace.note = "the closing ']' is missing (the writer was stopped between writes)";
      return;
    }
    if (parser.peek() == ']') {
      if (after_comma) {
        malformed(trace, "a ',' before the closing ']' at byte " +
                             std::to_string(parser.position()) + " (JSON allows no trailing comma)");
      }
      parser.advance();
      parser.skip_space();
      if (!parser.at_end()) {
        throw TraceError(trace.path + ": malformed JSON: trailing characters after the closing ']'"
                         " at byte " + std::to_string(parser.position()));
      }
      return;
    }
    const std::size_t start = parser.position();
    try {
      trace.events.push_back(parser.parse_value());
    } catch (const JsonError& e) {
      if (!e.at_end()) malformed(trace, e.what());
      trace.complete = false;
      trace.note = "the file ends inside event " + std::to_string(trace.events.size()) +
                   " (cut short at byte " + std::to_string(start) + "); it was skipped";
      return;
    }
    parser.skip_space();
    after_comma = parser.peek() == ',';
    if (after_comma) {
      parser.advance();
    } else if (!parser.at_end() && parser.peek() != ']') {
      malformed(trace, "expected ',' or ']' after event " + std::to_string(trace.events.size() - 1) +
                           " at byte " + std::to_string(parser.position()));
    }
  }
}

}  // namespace

TraceFile read_trace_text(const std::string& text, const std::string& path) {
  TraceFile trace;
  trace.path = path;
  JsonParser parser(text);
  parser.skip_space();
  try {
    if (parser.at_end()) throw TraceError(path + ": the file is empty (no trace was written)");
    if (parser.peek() == '[') {
      read_array(parser, trace);
    } else if (parser.peek() == '{') {
      JsonValue document = parse_json(text);
      const JsonValue* events = document.find("traceEvents");
      if (events == nullptr || events->kind() != JsonValue::Kind::Array) {
        throw TraceError(path + ": a JSON object trace needs a \"traceEvents\" array");
      }
      trace.events = events->items();
    } else {
      throw TraceError(path + ": not a trace: expected '[' or '{' at the start");
    }
  } catch (const JsonError& e) {
    throw TraceError(path + ": malformed JSON: " + e.what());
  }
  read_metadata(trace);
  return trace;
}

TraceFile read_trace_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TraceError(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return read_trace_text(text.str(), path);
}

std::string string_field(const JsonValue& event, const char* key) {
  const JsonValue* value = event.find(key);
  return value != nullptr && value->is_string() ? value->as_string() : std::string();
}

std::optional<double> number_field(const JsonValue& event, const char* key) {
  const JsonValue* value = event.find(key);
  if (value == nullptr || !value->is_number()) return std::nullopt;
  return value->as_number();
}

std::optional<double> numeric_arg(const JsonValue& event, const char* key) {
  const JsonValue* args = event.find("args");
  const JsonValue* value = args != nullptr ? args->find(key) : nullptr;
  if (value == nullptr) return std::nullopt;
  if (value->is_number()) return value->as_number();
  if (value->is_string() && !value->as_string().empty()) {
    char* end = nullptr;
    const double parsed = std::strtod(value->as_string().c_str(), &end);
    if (end != nullptr && *end == '\0') return parsed;
  }
  return std::nullopt;
}

}  // namespace hvd::timeline
