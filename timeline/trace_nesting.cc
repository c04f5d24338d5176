#include "timeline/trace_nesting.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

namespace hvd::timeline {
namespace {

// An open span on a row: a B waiting for its E, or an X whose end is known.
struct Open {
  bool complete;
  double end;  // X only
  std::string name;
  JsonValue pid, tid;
};

JsonValue synthetic_end(const Open& open) {
  JsonValue end = JsonValue::object();
  end.set("name", JsonValue::string(open.name));
  end.set("ph", JsonValue::string("E"));
  end.set("ts", JsonValue::number(open.end));
  end.set("pid", open.pid);
  end.set("tid", open.tid);
  return end;
}

// Times carry nanosecond digits; a sum of parsed doubles may be off in its last bits.
constexpr double kTimeSlack = 1e-6;

// True when the X on top of a row has ended before `event` begins.
bool ended_before(const Open& top, const std::string& phase, double ts, const JsonValue& event) {
  if (!top.complete) return false;
  if (top.end < ts - kTimeSlack) return true;
  if (top.end > ts + kTimeSlack) return false;
  // At the very end of the span: only a zero-length X still lies inside it.
  return !(phase == "X" && number_field(event, "dur").value_or(0) == 0);
}

}  // namespace

std::string row_key(const JsonValue& event) {
  const JsonValue* pid = event.find("pid");
  const JsonValue* tid = event.find("tid");
  return (pid ? pid->dump() : "?") + "/" + (tid ? tid->dump() : "?");
}

std::vector<JsonValue> nested_events(const std::vector<JsonValue>& events) {
  std::vector<JsonValue> out;
  out.reserve(events.size() * 2);
  std::map<std::string, std::vector<Open>> rows;
  for (const auto& event : events) {
    const std::string phase = string_field(event, "ph");
    const auto ts = number_field(event, "ts");
    if (phase == "M" || !ts) {
      out.push_back(event);
      continue;
    }
    std::vector<Open>& stack = rows[row_key(event)];
    while (!stack.empty() && ended_before(stack.back(), phase, *ts, event)) {
      out.push_back(synthetic_end(stack.back()));
      stack.pop_back();
    }
    if (phase == "X") {
      JsonValue begin = event;
      begin.set("ph", JsonValue::string("B"));
      begin.members().erase(
          std::remove_if(begin.members().begin(), begin.members().end(),
                         [](const auto& member) { return member.first == "dur"; }),
          begin.members().end());
      out.push_back(std::move(begin));
      const JsonValue* pid = event.find("pid");
      const JsonValue* tid = event.find("tid");
      stack.push_back({true, *ts + number_field(event, "dur").value_or(0),
                       string_field(event, "name"), pid ? *pid : JsonValue(),
                       tid ? *tid : JsonValue()});
    } else if (phase == "B") {
      out.push_back(event);
      stack.push_back({false, 0, string_field(event, "name"), {}, {}});
    } else if (phase == "E") {
      // Spans that must have ended inside the one this closes (a malformed overlap otherwise).
      while (!stack.empty() && stack.back().complete) {
        out.push_back(synthetic_end(stack.back()));
        stack.pop_back();
      }
      if (!stack.empty()) stack.pop_back();
      out.push_back(event);
    } else {
      out.push_back(event);
    }
  }
  for (auto& [key, stack] : rows) {
    while (!stack.empty()) {
      if (stack.back().complete) out.push_back(synthetic_end(stack.back()));
      stack.pop_back();
    }
  }
  return out;
}

std::vector<JsonValue> complete_events(const std::vector<JsonValue>& events) {
  std::vector<std::optional<JsonValue>> out;
  out.reserve(events.size());
  std::map<std::string, std::vector<std::size_t>> open;  // row -> indexes of its open B in out
  for (const auto& event : events) {
    const std::string phase = string_field(event, "ph");
    if (phase == "B") {
      open[row_key(event)].push_back(out.size());
      out.emplace_back(event);
    } else if (phase == "E") {
      auto row = open.find(row_key(event));
      if (row == open.end() || row->second.empty()) {
        out.emplace_back(event);  // closes nothing: left for check to report
        continue;
      }
      JsonValue& begin = *out[row->second.back()];
      row->second.pop_back();
      const double from = number_field(begin, "ts").value_or(0);
      const double to = number_field(event, "ts").value_or(from);
      begin.set("ph", JsonValue::string("X"));
      begin.set("dur", JsonValue::number(to > from ? to - from : 0));
      if (const JsonValue* end_args = event.find("args"); end_args && end_args->is_object()) {
        JsonValue args = begin.find("args") && begin.find("args")->is_object() ? *begin.find("args")
                                                                               : JsonValue::object();
        for (const auto& [key, value] : end_args->members()) args.set(key, value);
        begin.set("args", std::move(args));
      }
    } else {
      out.emplace_back(event);
    }
  }
  std::vector<JsonValue> result;
  result.reserve(out.size());
  for (auto& event : out) result.push_back(std::move(*event));
  return result;
}

}  // namespace hvd::timeline
