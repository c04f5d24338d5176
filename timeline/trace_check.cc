#include "timeline/trace_check.h"

#include <cstdio>
#include <map>
#include <utility>

namespace hvd::timeline {
namespace {

using RowKey = std::pair<std::string, std::string>;  // (pid, tid) as printed

struct OpenSpan {
  std::string name;
  std::size_t index;
};

struct RowState {
  double last_ts = 0;
  std::size_t last_index = 0;
  bool has_ts = false;
  std::vector<OpenSpan> open;
  std::size_t unnamed_ends = 0;
  std::vector<OpenSpan> complete;  // X events that enclose the current time: name, index
  std::vector<double> complete_end;
};

// Nanosecond digits are written; sums of parsed doubles may differ in the last bits.
constexpr double kTimeSlack = 1e-6;

std::string id_text(const JsonValue* value) {
  if (value == nullptr) return "?";
  return value->dump();
}

std::string fmt_ts(double ts) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.3f", ts);
  return buf;
}

// Field rules for one event; returns "" when it is well-formed.
std::string check_fields(const JsonValue& event) {
  if (!event.is_object()) return "an event must be a JSON object";
  const JsonValue* ph = event.find("ph");
  if (ph == nullptr || !ph->is_string()) return "missing \"ph\" (the phase)";
  const std::string phase = ph->as_string();
  static const std::string kKnown = "BEXiIMCbenstfPONDRc()";
  if (phase.size() != 1 || kKnown.find(phase[0]) == std::string::npos) {
    return "unknown phase \"" + phase + "\"";
  }
  const JsonValue* name = event.find("name");
  if (name != nullptr && !name->is_string()) return "\"name\" must be a string";
  if (name == nullptr && phase != "E") return "phase " + phase + " needs a \"name\"";
  const JsonValue* pid = event.find("pid");
  if (pid == nullptr) return "missing \"pid\"";
  if (!pid->is_number() && !pid->is_string()) return "\"pid\" must be a number or string";
  const JsonValue* tid = event.find("tid");
  if (tid != nullptr && !tid->is_number() && !tid->is_string()) {
    return "\"tid\" must be a number or string";
  }
  if (tid == nullptr && phase != "M") return "missing \"tid\"";
  const JsonValue* args = event.find("args");
  if (args != nullptr && !args->is_object()) return "\"args\" must be an object";
  if (phase == "M") {
    const std::string meta = name->as_string();
    if ((meta == "process_name" || meta == "thread_name") &&
        (args == nullptr || args->find("name") == nullptr || !args->find("name")->is_string())) {
      return meta + " needs args.name (a string)";
    }
    if ((meta == "process_sort_index" || meta == "thread_sort_index") &&
        (args == nullptr || args->find("sort_index") == nullptr ||
         !args->find("sort_index")->is_number())) {
      return meta + " needs args.sort_index (a number)";
    }
    return "";
  }
  const JsonValue* ts = event.find("ts");
  if (ts == nullptr || !ts->is_number()) return "missing or non-numeric \"ts\"";
  if (phase == "X") {
    const JsonValue* dur = event.find("dur");
    if (dur == nullptr || !dur->is_number() || dur->as_number() < 0) {
      return "phase X needs a non-negative \"dur\"";
    }
  }
  if (phase == "i" || phase == "I") {
    const JsonValue* scope = event.find("s");
    if (scope != nullptr &&
        (!scope->is_string() ||
         (scope->as_string() != "g" && scope->as_string() != "p" && scope->as_string() != "t"))) {
      return "instant scope \"s\" must be \"g\", \"p\" or \"t\"";
    }
  }
  return "";
}

// Nesting and time order on the event's row; returns "" when they hold.
std::string check_row(const JsonValue& event, std::size_t index, RowState& row,
                      const std::string& row_text) {
  const std::string phase = string_field(event, "ph");
  const double ts = event.find("ts")->as_number();
  if (row.has_ts && ts < row.last_ts) {
    return "\"ts\" " + fmt_ts(ts) + " goes back in time on " + row_text + " (event " +
           std::to_string(row.last_index) + " had " + fmt_ts(row.last_ts) + ")";
  }
  row.has_ts = true;
  row.last_ts = ts;
  row.last_index = index;
  if (phase == "X") {
    // Complete events on a row nest or follow each other: a viewer cannot draw a partial overlap.
    const double dur = event.find("dur")->as_number();
    while (!row.complete.empty() &&
           (row.complete_end.back() < ts - kTimeSlack ||
            (row.complete_end.back() <= ts + kTimeSlack && dur > 0))) {
      row.complete.pop_back();
      row.complete_end.pop_back();
    }
    if (!row.complete.empty() && ts + dur > row.complete_end.back() + kTimeSlack) {
      return "X \"" + string_field(event, "name") + "\" (" + fmt_ts(ts) + " to " +
             fmt_ts(ts + dur) + ") overlaps the end of X \"" + row.complete.back().name +
             "\" (event " + std::to_string(row.complete.back().index) + ", ending " +
             fmt_ts(row.complete_end.back()) + ") on " + row_text + " without nesting in it";
    }
    row.complete.push_back({string_field(event, "name"), index});
    row.complete_end.push_back(ts + dur);
  }
  if (phase == "B") {
    row.open.push_back({string_field(event, "name"), index});
  } else if (phase == "E") {
    if (row.open.empty()) return "E closes no open B on " + row_text;
    const std::string name = string_field(event, "name");
    if (name.empty()) ++row.unnamed_ends;
    if (!name.empty() && name != row.open.back().name) {
      return "E \"" + name + "\" does not match the open B \"" + row.open.back().name +
             "\" (event " + std::to_string(row.open.back().index) + ") on " + row_text;
    }
    row.open.pop_back();
  }
  return "";
}

}  // namespace

CheckResult check_trace(const TraceFile& trace) {
  CheckResult result;
  std::map<RowKey, RowState> rows;
  for (std::size_t i = 0; i < trace.events.size(); ++i) {
    const JsonValue& event = trace.events[i];
    std::string problem = check_fields(event);
    if (problem.empty() && string_field(event, "ph") != "M") {
      const RowKey key{id_text(event.find("pid")), id_text(event.find("tid"))};
      problem = check_row(event, i, rows[key], "row pid " + key.first + " tid " + key.second);
    }
    if (!problem.empty()) {
      result.ok = false;
      result.bad_index = i;
      result.message = "event " + std::to_string(i) + ": " + problem;
      return result;
    }
  }
  result.rows = rows.size();
  std::size_t open = 0, unnamed = 0;
  for (const auto& entry : rows) {
    open += entry.second.open.size();
    unnamed += entry.second.unnamed_ends;
  }
  if (unnamed > 0) {
    result.warnings.push_back(
        std::to_string(unnamed) +
        " end event(s) without a name (an older horovodcpp file): speedscope and DevTools do not"
        " close such spans; `hvd-timeline merge FILE -o OUT` rewrites them as complete events");
  }
  if (open > 0) {
    result.warnings.push_back(std::to_string(open) +
                              " span(s) still open at the end (recorded mid-run or cut short)");
  }
  if (!trace.complete) result.warnings.push_back("file cut short: " + trace.note);
  if (trace.dropped_events && *trace.dropped_events > 0) {
    result.warnings.push_back(std::to_string(*trace.dropped_events) +
                              " events were dropped by the writer (queue full)");
  }
  return result;
}

}  // namespace hvd::timeline
