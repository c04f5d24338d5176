#include "timeline/timeline_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "timeline/json_escape.h"
#include "timeline/output_file.h"

namespace hvd::detail {
namespace {

constexpr char kTrailer[] = "\n]\n";

bool is_plain_integer(const std::string& value) {
  std::size_t i = (!value.empty() && value[0] == '-') ? 1 : 0;
  if (i >= value.size() || value.size() - i > 18) return false;
  if (value[i] == '0' && value.size() - i > 1) return false;  // JSON forbids leading zeros
  for (; i < value.size(); ++i) {
    if (value[i] < '0' || value[i] > '9') return false;
  }
  return true;
}

void append_ts(std::string& out, std::int64_t ts_ns) {
  // Microseconds with nanosecond digits: Chrome's unit, without losing short memcpys.
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%lld.%03lld", static_cast<long long>(ts_ns / 1000),
                static_cast<long long>(ts_ns % 1000));
  out += buf;
}

}  // namespace

void append_json_arg_value(std::string& out, const std::string& value) {
  if (is_plain_integer(value)) {
    out += value;
  } else {
    append_json_string(out, value);
  }
}

TimelineWriter::TimelineWriter(const std::string& path, int rank, std::int64_t start_wall_us,
                               TimelineWarning warn)
    : path_(path), warn_(std::move(warn)) {
  // See Note [Output files are never followed through links].
  std::string why;
  fd_ = open_output_file(path, &why);
  if (fd_ < 0) throw TimelineError("timeline: " + why);
  // The header is an ordinary batch so that even an empty recording is a valid trace.
  // Every row, this one included, has a process and a thread name and sort indexes: viewers
  // otherwise show "Thread 22 (22)" and order rows by whim.
  std::vector<TimelineEvent> header(5);
  header[0] = {'M',
               0,
               kRuntimeRow,
               0,
               "hvd_timeline",
               {{"rank", std::to_string(rank)},
                {"start_wall_us", std::to_string(start_wall_us)},
                {"format", kTimelineFormat}}};
  header[1] = {'M', 0, kRuntimeRow, 0, "process_name", {{"name", "rank " + std::to_string(rank)}}};
  header[2] = {'M', 0, kRuntimeRow, 0, "process_sort_index", {{"sort_index", "0"}}};
  header[3] = {'M', 0, kRuntimeRow, 0, "thread_name", {{"name", "runtime"}}};
  header[4] = {'M', 0, kRuntimeRow, 0, "thread_sort_index", {{"sort_index", "0"}}};
  buffer_ = "[\n";
  content_end_ = 0;
  if (!write(header)) {
    ::close(fd_);
    fd_ = -1;
    throw TimelineError("timeline: cannot write to '" + path + "': " + std::strerror(errno));
  }
}

TimelineWriter::~TimelineWriter() {
  if (fd_ < 0) return;
  // Drop the padding an earlier, longer trailer left (only spaces: valid JSON either way).
  if (!failed_ && trailer_end_ < file_end_) (void)::ftruncate(fd_, static_cast<off_t>(trailer_end_));
  ::close(fd_);
}

void TimelineWriter::format(const TimelineEvent& event, std::string& out) {
  if (!first_event_) out += ",\n";
  first_event_ = false;
  format_object(event, out);
}

void TimelineWriter::format_object(const TimelineEvent& event, std::string& out) {
  out += "{\"name\":";
  append_json_string(out, event.name);
  out += ",\"ph\":\"";
  out.push_back(event.phase);
  out += '"';
  if (event.phase != 'M') {
    out += ",\"ts\":";
    append_ts(out, event.ts_ns);
  }
  if (event.phase == 'X') {
    out += ",\"dur\":";
    append_ts(out, event.dur_ns);
  }
  const std::string row = std::to_string(event.pid);
  out += ",\"pid\":" + row + ",\"tid\":" + row;
  if (event.scope != 0) {
    out += ",\"s\":\"";
    out.push_back(event.scope);
    out += '"';
  }
  if (!event.args.empty()) {
    out += ",\"args\":{";
    for (std::size_t i = 0; i < event.args.size(); ++i) {
      if (i > 0) out += ',';
      append_json_string(out, event.args[i].first);
      out += ':';
      append_json_arg_value(out, event.args[i].second);
    }
    out += '}';
  }
  out += '}';
}

bool TimelineWriter::write(const std::vector<TimelineEvent>& events,
                           const std::vector<TimelineEvent>& open) {
  if (failed_) return false;
  for (const auto& event : events) format(event, buffer_);
  const std::size_t body = buffer_.size();
  bool first = first_event_;  // the trailer's events are not part of the content
  for (const auto& event : open) {
    if (!first) buffer_ += ",\n";
    first = false;
    format_object(event, buffer_);
  }
  buffer_ += kTrailer;
  const std::int64_t text_end = content_end_ + static_cast<std::int64_t>(buffer_.size());
  if (text_end < file_end_) buffer_.append(static_cast<std::size_t>(file_end_ - text_end), ' ');
  const bool ok = append(buffer_);
  if (ok) {
    content_end_ += static_cast<std::int64_t>(body);
    trailer_end_ = text_end;
    file_end_ = std::max(file_end_, text_end);
  }
  buffer_.clear();
  return ok;
}

bool TimelineWriter::append(const std::string& data) {
  // One pwrite over the old trailer: the file never holds two trailers or a gap.
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::pwrite(fd_, data.data() + done, data.size() - done,
                         static_cast<off_t>(content_end_ + static_cast<std::int64_t>(done)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      failed_ = true;
      if (warn_) warn_("timeline: writing '" + path_ + "' failed (" + std::strerror(errno) + "); recording stopped");
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace hvd::detail
