// Turns the recorder's stream of begin/end events into what every viewer draws: a span is held
// back until its end arrives and is then written once, as a complete event ("ph":"X" with
// "dur"), with everything that happened inside it (nested spans, instants) after it. Viewers
// pair begin/end events badly (DevTools pairs them across rows; speedscope and DevTools need
// the end to repeat the begin's name), while complete events need no pairing.
//
// What is still open goes into each write's trailer (open_spans(), as begin events with what
// they hold so far), which the next write overwrites: a finished file holds complete events
// only, and a process killed mid-span leaves a file that shows the spans it died in. Only when
// more than `max_held` events are held are the open spans spilled for good: written as begin
// events, their ends following later as end events that repeat the begin's name and args. Used
// only by the Timeline's writer thread; owned by it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "timeline/timeline_writer.h"

namespace hvd::detail {

class SpanFolder {
 public:
  explicit SpanFolder(std::size_t max_held) : max_held_(max_held) {}

  // Moves `events` (B, E, instants, metadata and X, in recording order) into `out` as far as
  // they can be written now; B/E become X where the span closed while held.
  void fold(std::vector<TimelineEvent>& events, std::vector<TimelineEvent>& out);
  // The spans open now (outermost first on each row) with what each holds: a write's trailer.
  void open_spans(std::vector<TimelineEvent>& out) const;
  // Spills every span that began before `cutoff_ns` (and the spans open inside it).
  void spill_older_than(std::int64_t cutoff_ns, std::vector<TimelineEvent>& out);
  void reset();

 private:
  // An open span: its begin, and while held, what happened inside it so far.
  struct Frame {
    TimelineEvent begin;
    bool spilled = false;
    std::vector<TimelineEvent> content;
  };
  using Stack = std::vector<Frame>;

  void add(TimelineEvent&& event, std::vector<TimelineEvent>& out);
  void close(Stack& stack, TimelineEvent&& end, std::vector<TimelineEvent>& out);
  // Appends to the innermost held frame, or writes when that frame is spilled (or none is open).
  void emit(Stack& stack, TimelineEvent&& event, std::vector<TimelineEvent>& out);
  void spill(Stack& stack, std::vector<TimelineEvent>& out);

  std::size_t max_held_;
  std::size_t held_ = 0;                // frames and content events held, over all rows
  std::unordered_map<int, Stack> rows_;  // by row (pid); only rows with spans open
};

}  // namespace hvd::detail
