#include "timeline/trace_merge.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "timeline/output_file.h"
#include "timeline/trace_nesting.h"

namespace hvd::timeline {
namespace {

JsonValue meta(const std::string& name, int pid, double tid, const char* key, JsonValue value) {
  JsonValue event = JsonValue::object();
  event.set("name", JsonValue::string(name));
  event.set("ph", JsonValue::string("M"));
  event.set("pid", JsonValue::number(pid));
  event.set("tid", JsonValue::number(tid));
  JsonValue args = JsonValue::object();
  args.set(key, std::move(value));
  event.set("args", std::move(args));
  return event;
}

// The pid of a rank file's own row: that of its "hvd_timeline" header (older files: 0).
std::string runtime_pid(const TraceFile& trace) {
  for (const auto& event : trace.events) {
    if (string_field(event, "ph") == "M" && string_field(event, "name") == "hvd_timeline" &&
        event.find("pid") != nullptr) {
      return event.find("pid")->dump();
    }
  }
  return "0";
}

// A trace's tensor rows: pid (as text) -> process_name, i.e. the tensor name. A name may own
// several pids (the recorder forgot the row and gave it a new one); they merge into one row.
std::map<std::string, std::string> tensor_names(const TraceFile& trace) {
  const std::string own = runtime_pid(trace);
  std::map<std::string, std::string> names;
  for (const auto& event : trace.events) {
    if (string_field(event, "ph") != "M" || string_field(event, "name") != "process_name") continue;
    const JsonValue* args = event.find("args");
    const JsonValue* pid = event.find("pid");
    if (args != nullptr && args->find("name") != nullptr && pid != nullptr && pid->dump() != own) {
      names[pid->dump()] = args->find("name")->as_string();
    }
  }
  return names;
}

std::vector<int> ranks_of(const std::vector<TraceFile>& traces) {
  std::vector<int> ranks;
  std::set<int> seen;
  for (std::size_t i = 0; i < traces.size(); ++i) {
    const int rank = traces[i].rank.value_or(static_cast<int>(i));
    if (!seen.insert(rank).second) {
      throw TraceError("merge: " + traces[i].path + " records rank " + std::to_string(rank) +
                       ", which another input also records");
    }
    ranks.push_back(rank);
  }
  return ranks;
}

// The earliest recorded wall-clock start: ranks are shifted onto it.
std::optional<std::int64_t> base_wall_us(const std::vector<TraceFile>& traces) {
  std::optional<std::int64_t> base;
  for (const auto& trace : traces) {
    if (trace.start_wall_us && (!base || *trace.start_wall_us < *base)) base = trace.start_wall_us;
  }
  return base;
}

// Row numbers (tids) by tensor, in order of first appearance over the inputs, after the
// runtime's own row.
std::map<std::string, int> tensor_rows(
    const std::vector<TraceFile>& traces,
    const std::vector<std::map<std::string, std::string>>& names) {
  std::map<std::string, int> rows;
  for (std::size_t i = 0; i < traces.size(); ++i) {
    for (const auto& event : traces[i].events) {
      const JsonValue* pid = event.find("pid");
      if (pid == nullptr) continue;
      auto name = names[i].find(pid->dump());
      if (name != names[i].end() && !rows.count(name->second)) {
        const int row = kMergedRuntimeTid + 1 + static_cast<int>(rows.size());
        rows[name->second] = row;
      }
    }
  }
  return rows;
}

void append_group_metadata(int rank, const TraceFile& trace, const std::map<std::string, int>& rows,
                           std::vector<JsonValue>& out) {
  const int pid = merged_pid(rank);
  const int own = kMergedRuntimeTid;
  out.push_back(
      meta("process_name", pid, own, "name", JsonValue::string("rank " + std::to_string(rank))));
  out.push_back(meta("process_sort_index", pid, own, "sort_index", JsonValue::number(rank)));
  out.push_back(meta("thread_name", pid, own, "name", JsonValue::string("runtime")));
  out.push_back(meta("thread_sort_index", pid, own, "sort_index", JsonValue::number(own)));
  out.push_back(meta("hvd_rank_group", pid, own, "rank", JsonValue::number(rank)));
  for (const auto& [name, row] : rows) {
    out.push_back(meta("thread_name", pid, row, "name", JsonValue::string(name)));
    out.push_back(meta("thread_sort_index", pid, row, "sort_index", JsonValue::number(row)));
  }
  if (trace.dropped_events) {
    out.push_back(meta("hvd_dropped_events", pid, own, "count",
                       JsonValue::number(static_cast<double>(*trace.dropped_events))));
  }
}

}  // namespace

std::vector<JsonValue> merge_traces(const std::vector<TraceFile>& traces) {
  const std::vector<int> ranks = ranks_of(traces);
  const auto base = base_wall_us(traces);
  std::vector<std::map<std::string, std::string>> names;
  for (const auto& trace : traces) names.push_back(tensor_names(trace));
  std::map<std::string, int> rows = tensor_rows(traces, names);
  std::vector<JsonValue> out;
  for (std::size_t i = 0; i < traces.size(); ++i) {
    append_group_metadata(ranks[i], traces[i], rows, out);
  }
  for (std::size_t i = 0; i < traces.size(); ++i) {
    const double shift =
        traces[i].start_wall_us && base ? double(*traces[i].start_wall_us - *base) : 0;
    for (const auto& event : complete_events(traces[i].events)) {
      if (string_field(event, "ph") == "M") continue;  // regenerated above
      const JsonValue* pid = event.find("pid");
      auto name = pid != nullptr ? names[i].find(pid->dump()) : names[i].end();
      const int row = name == names[i].end() ? kMergedRuntimeTid : rows[name->second];
      JsonValue copy = event;
      copy.set("pid", JsonValue::number(merged_pid(ranks[i])));
      copy.set("tid", JsonValue::number(row));
      if (auto ts = number_field(event, "ts")) copy.set("ts", JsonValue::number(*ts + shift));
      if (string_field(event, "s") == "g") copy.set("s", JsonValue::string("p"));  // per rank
      out.push_back(std::move(copy));
    }
  }
  return out;
}

void write_trace(const std::vector<JsonValue>& events, const std::string& path) {
  std::string text = "[\n";
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (i > 0) text += ",\n";
    events[i].dump_to(text);
  }
  text += "\n]\n";
  // See Note [Output files are never followed through links].
  std::string why;
  const int fd = hvd::detail::open_output_file(path, &why);
  if (fd < 0) throw TraceError("merge: " + why);
  const bool written = hvd::detail::write_all(fd, text.data(), text.size());
  const int saved = errno;
  if (::close(fd) != 0 || !written)
    throw TraceError("merge: writing '" + path + "' failed: " + std::strerror(written ? errno : saved));
}

}  // namespace hvd::timeline
