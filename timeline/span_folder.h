// Turns the recorder's stream of begin/end events into what every viewer draws: a span is held
// back until its end arrives and is then written once, as a complete event ("ph":"X" with
// "dur"), with everything that happened inside it (nested spans, instants) after it. Viewers
// pair begin/end events badly (DevTools pairs them across rows; speedscope and DevTools need
// the end to repeat the begin's name), while complete events need no pairing.
//
// A span still open `hold` after it began -- a stalled negotiation, or one the process dies
// in -- is spilled: written as a begin event (with what it holds so far), so the file shows it
// even after kill -9, and its end follows later as an end event that repeats its name. A spill
// of every open span happens on request (Timeline::flush) and when more than `max_held` events
// are held. Used only by the Timeline's writer thread; owned by it.
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
  // Spills every span that began before `cutoff_ns` (and the spans open inside it).
  void spill_older_than(std::int64_t cutoff_ns, std::vector<TimelineEvent>& out);
  std::size_t held_events() const { return held_; }
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
