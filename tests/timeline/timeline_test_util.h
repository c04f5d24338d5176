// Helpers shared by the timeline tests: temporary paths, file text, and a tensor row's events
// flattened to strings ("B ALLREDUCE", "B READY 1", "E READY 1", "E ALLREDUCE") so sequences
// compare directly. Complete events (X) read as the B/E pair a viewer draws (trace_nesting.h).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "timeline/trace_file.h"
#include "timeline/trace_nesting.h"

namespace hvd::timeline::test {

inline std::string temp_path(const std::string& stem) {
  return "/tmp/hvd_timeline_test_" + std::to_string(::getpid()) + "_" + stem + ".json";
}

inline std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs a shell command; returns its exit status (-1 if it did not exit) and combined output.
inline std::pair<int, std::string> run_command(const std::string& command) {
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string output;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof(buf), pipe)) output.append(buf, n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

#ifdef HVD_TIMELINE_TOOL
// Runs the hvd-timeline binary with `args`.
inline std::pair<int, std::string> run_tool(const std::string& args) {
  return run_command(std::string(HVD_TIMELINE_TOOL) + " " + args);
}
#endif

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// The pid of the row whose process_name is `tensor` (-1 if none).
inline int row_pid(const TraceFile& trace, const std::string& tensor) {
  for (const auto& event : trace.events) {
    if (string_field(event, "ph") != "M" || string_field(event, "name") != "process_name") continue;
    const JsonValue* args = event.find("args");
    if (args && args->find("name") && args->find("name")->as_string() == tensor) {
      return static_cast<int>(event.find("pid")->as_number());
    }
  }
  return -1;
}

// The timed events on one row (pid, and tid when given), each as "PH NAME"; an E carries the
// name of the B it closes.
inline std::vector<std::string> row_sequence(const TraceFile& trace, int pid, int tid = -1) {
  std::vector<std::string> out;
  std::vector<std::string> open;
  for (const auto& event : nested_events(trace.events)) {
    const std::string ph = string_field(event, "ph");
    if (ph == "M" || !event.find("pid") || event.find("pid")->as_number() != pid) continue;
    if (tid >= 0 && event.find("tid")->as_number() != tid) continue;
    if (ph == "B") open.push_back(string_field(event, "name"));
    if (ph == "E") {
      out.push_back("E " + (open.empty() ? std::string("?") : open.back()));
      if (!open.empty()) open.pop_back();
    } else {
      out.push_back(ph + " " + string_field(event, "name"));
    }
  }
  return out;
}

inline std::vector<std::string> tensor_sequence(const TraceFile& trace, const std::string& tensor) {
  return row_sequence(trace, row_pid(trace, tensor));
}

// The first span (X, or B) named `name` on a row, or nullptr.
inline const JsonValue* find_begin(const TraceFile& trace, int pid, const std::string& name) {
  for (const auto& event : trace.events) {
    const std::string ph = string_field(event, "ph");
    if ((ph == "B" || ph == "X") && string_field(event, "name") == name &&
        event.find("pid")->as_number() == pid) {
      return &event;
    }
  }
  return nullptr;
}

inline std::string arg_text(const JsonValue& event, const char* key) {
  const JsonValue* args = event.find("args");
  const JsonValue* value = args ? args->find(key) : nullptr;
  if (value == nullptr) return "<absent>";
  return value->is_string() ? value->as_string() : value->dump();
}

// An argument of the first span named `name` on a row, as a viewer shows it: the E event's
// args merged over the B event's. "<absent>" when neither has it (or there is no such span).
inline std::string span_arg(const TraceFile& trace, int pid, const std::string& name,
                            const char* key) {
  const JsonValue* begin = nullptr;
  int depth = 0;
  const std::vector<JsonValue> events = nested_events(trace.events);
  for (const auto& event : events) {
    const std::string ph = string_field(event, "ph");
    if ((ph != "B" && ph != "E") || event.find("pid")->as_number() != pid) continue;
    if (begin == nullptr) {
      if (ph == "B" && string_field(event, "name") == name) begin = &event;
      continue;
    }
    depth += ph == "B" ? 1 : -1;
    if (depth < 0) {
      const std::string at_end = arg_text(event, key);
      return at_end != "<absent>" ? at_end : arg_text(*begin, key);
    }
  }
  return begin != nullptr ? arg_text(*begin, key) : "<absent>";
}

}  // namespace hvd::timeline::test
