#include "timeline/span_folder.h"

#include <cstdint>
#include <utility>

namespace hvd::detail {
namespace {

// The end's args over the begin's, as viewers merge them (a key in both keeps the end's value,
// once: JSON objects must not repeat a name).
void merge_args(TimelineArgs& into, TimelineArgs&& from_end) {
  for (auto& [key, value] : from_end) {
    bool replaced = false;
    for (auto& existing : into) {
      if (existing.first == key) {
        existing.second = std::move(value);
        replaced = true;
        break;
      }
    }
    if (!replaced) into.emplace_back(key, std::move(value));
  }
}

}  // namespace

void SpanFolder::reset() {
  rows_.clear();
  held_ = 0;
}

void SpanFolder::fold(std::vector<TimelineEvent>& events, std::vector<TimelineEvent>& out) {
  for (auto& event : events) add(std::move(event), out);
  events.clear();
  if (held_ > max_held_) spill_older_than(INT64_MAX, out);
}

void SpanFolder::add(TimelineEvent&& event, std::vector<TimelineEvent>& out) {
  if (event.phase == 'M') {
    out.push_back(std::move(event));
    return;
  }
  if (event.phase == 'B') {
    Stack& stack = rows_[event.pid];
    stack.push_back({std::move(event), false, {}});
    ++held_;
    return;
  }
  auto row = rows_.find(event.pid);
  if (row == rows_.end()) {
    if (event.phase != 'E') out.push_back(std::move(event));  // an E without a B: never written
    return;
  }
  if (event.phase == 'E') {
    close(row->second, std::move(event), out);
    if (row->second.empty()) rows_.erase(row);
  } else {
    emit(row->second, std::move(event), out);
  }
}

void SpanFolder::emit(Stack& stack, TimelineEvent&& event, std::vector<TimelineEvent>& out) {
  if (!stack.empty() && !stack.back().spilled) {
    stack.back().content.push_back(std::move(event));
    ++held_;
  } else {
    out.push_back(std::move(event));
  }
}

void SpanFolder::close(Stack& stack, TimelineEvent&& end, std::vector<TimelineEvent>& out) {
  Frame frame = std::move(stack.back());
  stack.pop_back();
  if (frame.spilled) {  // its B is in the file: the end repeats its name and args (viewers
    end.name = frame.begin.name;  // such as speedscope match on both)
    TimelineArgs args = frame.begin.args;
    merge_args(args, std::move(end.args));
    end.args = std::move(args);
    out.push_back(std::move(end));
    return;
  }
  held_ -= 1 + frame.content.size();
  TimelineEvent complete = std::move(frame.begin);
  complete.phase = 'X';
  complete.dur_ns = end.ts_ns - complete.ts_ns;
  merge_args(complete.args, std::move(end.args));
  emit(stack, std::move(complete), out);
  for (auto& inner : frame.content) emit(stack, std::move(inner), out);
}

void SpanFolder::spill(Stack& stack, std::vector<TimelineEvent>& out) {
  // Open frames nest: each one's content happened before the next one began, so writing them
  // outermost first keeps the row in time order.
  for (Frame& frame : stack) {
    if (frame.spilled) continue;
    out.push_back(frame.begin);
    for (auto& inner : frame.content) out.push_back(std::move(inner));
    held_ -= 1 + frame.content.size();
    frame.content.clear();
    frame.spilled = true;
  }
}

void SpanFolder::open_spans(std::vector<TimelineEvent>& out) const {
  for (const auto& [pid, stack] : rows_) {
    for (const Frame& frame : stack) {  // each one's content happened before the next began
      if (frame.spilled) continue;       // in the file already
      out.push_back(frame.begin);
      out.insert(out.end(), frame.content.begin(), frame.content.end());
    }
  }
}

void SpanFolder::spill_older_than(std::int64_t cutoff_ns, std::vector<TimelineEvent>& out) {
  for (auto& [pid, stack] : rows_) {
    for (const Frame& frame : stack) {
      if (frame.spilled) continue;
      if (frame.begin.ts_ns < cutoff_ns) spill(stack, out);
      break;  // the first held frame began first
    }
  }
}

}  // namespace hvd::detail
