// Formats timeline events as Chrome Trace Event JSON and appends them to one file so that the
// file is a complete JSON array after every write: each batch ends with a trailer -- the spans
// still open, as begin events, and the closing "]" -- which the next batch overwrites in place
// (padded with spaces where it is shorter). So a finished file holds complete events only, and a
// process killed between writes leaves valid JSON that shows the spans it died in; one killed
// inside a write leaves a file cut short, which hvd-timeline tolerates and merge repairs. Used
// only by the Timeline's writer thread; owned by the Timeline.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "timeline/timeline.h"

namespace hvd::detail {

// The runtime's own row (header metadata, CYCLE slices and CYCLE_START instants, dropped-event
// counts); tensor rows are numbered after it. Never 0: Perfetto treats pid 0 as the idle process.
constexpr int kRuntimeRow = 1;

// Events in the file: 'X' (a complete span, with dur), 'B'/'E' (a span still open when it was
// written, and its end, which repeats the begin's name), 'i' (instant) and 'M' (metadata).
// It is written with pid and tid both set to its row.
struct TimelineEvent {
  char phase = 'B';
  char scope = 0;          // instants: 'g' (global) or 't' (thread); 0 for others
  int pid = kRuntimeRow;   // the tensor's row
  std::int64_t ts_ns = 0;  // since recording started
  std::string name;
  TimelineArgs args;        // values that are plain integers are written as JSON numbers
  std::int64_t dur_ns = 0;  // 'X' only
};

// The format tag in the "hvd_timeline" metadata: 2 = complete events and named ends.
constexpr char kTimelineFormat[] = "horovodcpp-timeline-2";

class TimelineWriter {
 public:
  // Creates (truncates) `path` and writes the header metadata. Throws TimelineError naming the
  // path. `warn` hears of a later write that fails.
  TimelineWriter(const std::string& path, int rank, std::int64_t start_wall_us, TimelineWarning warn);
  ~TimelineWriter();
  TimelineWriter(const TimelineWriter&) = delete;
  TimelineWriter& operator=(const TimelineWriter&) = delete;

  // Appends the events, then the trailer: `open` (spans still open, and what they hold) and the
  // closing bracket, in one write. Returns false (and stops writing) after an I/O error, which is
  // reported once through the warning callback.
  bool write(const std::vector<TimelineEvent>& events, const std::vector<TimelineEvent>& open = {});
  const std::string& path() const { return path_; }

 private:
  void format(const TimelineEvent& event, std::string& out);
  static void format_object(const TimelineEvent& event, std::string& out);
  bool append(const std::string& body);

  std::string path_;
  TimelineWarning warn_;
  int fd_ = -1;
  bool failed_ = false;
  bool first_event_ = true;
  std::int64_t content_end_ = 0;  // where the trailer starts; the next batch overwrites it
  std::int64_t trailer_end_ = 0;  // where the last trailer's text ends (padding follows)
  std::int64_t file_end_ = 0;     // where the file ends
  std::string buffer_;            // reused between batches
};

// Formats a TimelineArgs value: a JSON number when it is a plain integer, else a string.
void append_json_arg_value(std::string& out, const std::string& value);

}  // namespace hvd::detail
