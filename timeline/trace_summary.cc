#include "timeline/trace_summary.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <utility>

namespace hvd::timeline {
namespace {

constexpr std::size_t kTopRows = 10;
constexpr std::size_t kMaxErrorMessages = 5;
const std::string kNegotiatePrefix = "NEGOTIATE_";

struct OpenSpan {
  std::string name;
  double ts;
  const JsonValue* begin;
};

struct RowState {
  std::string label;
  std::vector<OpenSpan> open;
  std::vector<std::pair<double, int>> ready;  // (ts, rank) since the last negotiation ended
};

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

// Row labels: a thread_name (merged traces: one row per tensor inside a rank's group) wins over
// the process_name (single-rank traces: one process per tensor, as Horovod writes).
std::map<std::string, std::string> row_labels(const TraceFile& trace) {
  std::map<std::string, std::string> labels;
  for (const auto& event : trace.events) {
    if (string_field(event, "ph") != "M") continue;
    const JsonValue* args = event.find("args");
    const JsonValue* name = args != nullptr ? args->find("name") : nullptr;
    if (name == nullptr || !name->is_string()) continue;
    const std::string pid = event.find("pid") ? event.find("pid")->dump() : "?";
    const std::string tid = event.find("tid") ? event.find("tid")->dump() : "?";
    if (string_field(event, "name") == "thread_name") {
      labels["t" + pid + "/" + tid] = name->as_string();
    } else if (string_field(event, "name") == "process_name") {
      labels["p" + pid] = name->as_string();
    }
  }
  return labels;
}

class Summarizer {
 public:
  explicit Summarizer(const TraceFile& trace) : labels_(row_labels(trace)) {
    // In a merged trace each pid is a rank's group ("hvd_rank_group" metadata): fused
    // responses are told apart per rank. In a one-rank trace each pid is a tensor.
    for (const auto& event : trace.events) {
      if (string_field(event, "ph") == "M" && string_field(event, "name") == "hvd_rank_group" &&
          event.find("pid") != nullptr) {
        rank_groups_.insert(event.find("pid")->dump());
      }
    }
  }
  void add(const JsonValue& event);
  TraceSummary finish();

 private:
  RowState& row(const JsonValue& event);
  void close_span(RowState& row, const OpenSpan& span, const JsonValue& end);
  void close_negotiation(RowState& row);
  void count_op(const RowState& row, const OpenSpan& span, const JsonValue& end);

  std::map<std::string, std::string> labels_;
  std::map<std::string, RowState> rows_;
  std::map<std::string, std::set<std::string>> fused_open_;  // rows in the current response
  std::set<std::string> rank_groups_;
  TraceSummary summary_;
};

RowState& Summarizer::row(const JsonValue& event) {
  const std::string pid = event.find("pid") ? event.find("pid")->dump() : "?";
  const std::string tid = event.find("tid") ? event.find("tid")->dump() : "?";
  const std::string key = pid + "/" + tid;
  auto it = rows_.find(key);
  if (it != rows_.end()) return it->second;
  RowState& state = rows_[key];
  auto label = labels_.find("t" + key);
  if (label == labels_.end()) label = labels_.find("p" + pid);
  state.label = label != labels_.end() ? label->second : "pid " + pid + " tid " + tid;
  return state;
}

void Summarizer::add(const JsonValue& event) {
  const std::string phase = string_field(event, "ph");
  const auto ts = number_field(event, "ts");
  if (phase == "M" || !ts) return;
  RowState& state = row(event);
  if (phase == "B") {
    state.open.push_back({string_field(event, "name"), *ts, &event});
  } else if (phase == "E" && !state.open.empty()) {
    const OpenSpan span = state.open.back();
    state.open.pop_back();
    close_span(state, span, event);
  } else if (phase == "X") {
    summary_.spans[string_field(event, "name")].add(number_field(event, "dur").value_or(0));
  } else if (phase == "i" || phase == "I") {
    const std::string name = string_field(event, "name");
    if (name == "CYCLE_START") {
      ++summary_.cycles;
    } else if (auto rank = numeric_arg(event, "rank")) {
      state.ready.emplace_back(*ts, static_cast<int>(*rank));
    }
  }
}

void Summarizer::close_span(RowState& state, const OpenSpan& span, const JsonValue& end) {
  const double us = number_field(end, "ts").value_or(span.ts) - span.ts;
  summary_.spans[span.name].add(us);
  if (!state.open.empty()) return;  // an activity inside an op
  TensorStats& tensor = summary_.tensors[state.label];
  if (starts_with(span.name, kNegotiatePrefix)) {
    tensor.negotiation.add(us);
    close_negotiation(state);
  } else {
    tensor.ops.add(us);
    count_op(state, span, end);
  }
}

void Summarizer::close_negotiation(RowState& state) {
  if (state.ready.size() >= 2) {
    // The last rank to report is the one the others waited for.
    auto last = state.ready.front();
    for (const auto& ready : state.ready) {
      if (ready.first >= last.first) last = ready;
    }
    ++summary_.last_ready[last.second];
    ++summary_.ranked_negotiations;
  }
  state.ready.clear();
}

void Summarizer::count_op(const RowState& state, const OpenSpan& span, const JsonValue& end) {
  const JsonValue& begin = *span.begin;
  const double bytes = numeric_arg(begin, "bytes").value_or(0);
  summary_.bytes += bytes;
  const JsonValue* args = begin.find("args");
  const JsonValue* fused = args != nullptr ? args->find("fused_with") : nullptr;
  if (fused != nullptr) {
    ++summary_.fused_ops;
    summary_.fused_bytes += bytes;
    const std::string pid = begin.find("pid") ? begin.find("pid")->dump() : "";
    const std::string tid = begin.find("tid") ? begin.find("tid")->dump() : "";
    // fused_with need not be unique per response (the same tensors fuse alike every step): a
    // response ends when one of its rows shows up again with the same fused_with.
    std::set<std::string>& rows =
        fused_open_[(rank_groups_.count(pid) ? pid : "") + "|" + fused->dump()];
    if (!rows.insert(pid + "/" + tid).second) {
      ++summary_.fused_responses;
      rows = {pid + "/" + tid};
    }
  } else if (span.name != "ERROR") {
    ++summary_.unfused_ops;
  }
  const JsonValue* end_args = end.find("args");
  const JsonValue* error = end_args != nullptr ? end_args->find("error") : nullptr;
  if (error == nullptr && args != nullptr) error = args->find("error");
  if (error != nullptr || span.name == "ERROR") {
    ++summary_.errors;
    ++summary_.tensors[state.label].errors;
    if (summary_.error_messages.size() < kMaxErrorMessages) {
      summary_.error_messages.push_back(
          state.label + ": " +
          (error != nullptr && error->is_string() ? error->as_string() : span.name));
    }
  }
}

TraceSummary Summarizer::finish() {
  for (const auto& entry : fused_open_) summary_.fused_responses += entry.second.empty() ? 0 : 1;
  for (const auto& entry : rows_) summary_.open_spans += entry.second.open.size();
  return summary_;
}

std::string ms(double us) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", us / 1000.0);
  return buf;
}

void print_row(std::ostream& out, const std::string& name, const SpanStats& s) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "  %-40s %8zu %12s %10s %10s\n", name.c_str(), s.count,
                ms(s.total_us).c_str(), ms(s.count ? s.total_us / s.count : 0).c_str(),
                ms(s.max_us).c_str());
  out << buf;
}

void print_header(std::ostream& out, const char* title) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "\n%s\n  %-40s %8s %12s %10s %10s\n", title, "name", "count",
                "total ms", "mean ms", "max ms");
  out << buf;
}

// The rows with the largest value of `key`, largest first.
template <class Key>
std::vector<std::pair<std::string, TensorStats>> top_rows(const TraceSummary& s, Key key) {
  std::vector<std::pair<std::string, TensorStats>> rows(s.tensors.begin(), s.tensors.end());
  std::stable_sort(rows.begin(), rows.end(),
                   [&](const auto& a, const auto& b) { return key(a.second) > key(b.second); });
  if (rows.size() > kTopRows) rows.resize(kTopRows);
  return rows;
}

void print_fusion_and_ranks(const TraceSummary& s, std::ostream& out) {
  out << "\nFusion: " << s.fused_ops << " tensor op(s) rode in " << s.fused_responses
      << " fused response(s)";
  if (s.fused_responses > 0) {
    out << " (mean " << static_cast<double>(s.fused_ops) / s.fused_responses << " tensors, "
        << s.fused_bytes / s.fused_responses << " bytes per response)";
  }
  out << "; " << s.unfused_ops << " op(s) ran unfused; " << s.bytes << " bytes in all\n";
  out << "\nLast rank ready (over " << s.ranked_negotiations
      << " negotiations with 2+ ranks reporting):";
  if (s.last_ready.empty()) out << " none recorded (rank 0's file records every rank)";
  out << "\n";
  int worst = -1;
  std::size_t worst_count = 0;
  for (const auto& [rank, count] : s.last_ready) {
    out << "  rank " << rank << ": last in " << count << "\n";
    if (count > worst_count) worst = rank, worst_count = count;
  }
  if (worst >= 0) out << "  most often last: rank " << worst << "\n";
}

}  // namespace

void SpanStats::add(double us) {
  ++count;
  total_us += us;
  max_us = std::max(max_us, us);
}

TraceSummary summarize_trace(const TraceFile& trace) {
  Summarizer summarizer(trace);
  for (const auto& event : trace.events) summarizer.add(event);
  return summarizer.finish();
}

void print_summary(const TraceFile& trace, const TraceSummary& s, std::ostream& out) {
  out << "Trace " << trace.path;
  if (trace.rank) out << " (rank " << *trace.rank << ")";
  out << ": " << trace.events.size() << " events, " << s.tensors.size() << " tensor row(s), "
      << s.cycles << " cycle mark(s)\n";
  if (!trace.complete) out << "  cut short: " << trace.note << "\n";
  if (trace.dropped_events) out << "  dropped events: " << *trace.dropped_events << "\n";
  if (s.open_spans > 0) out << "  spans still open at the end: " << s.open_spans << "\n";
  print_header(out, "Time per phase and op:");
  for (const auto& [name, stats] : s.spans) print_row(out, name, stats);
  print_header(out, "Negotiation wait per tensor (longest total first):");
  for (const auto& [name, t] :
       top_rows(s, [](const TensorStats& t) { return t.negotiation.total_us; })) {
    if (t.negotiation.count > 0) print_row(out, name, t.negotiation);
  }
  print_header(out, "Slowest tensors (longest single op first):");
  for (const auto& [name, t] : top_rows(s, [](const TensorStats& t) { return t.ops.max_us; })) {
    if (t.ops.count > 0) print_row(out, name, t.ops);
  }
  print_fusion_and_ranks(s, out);
  out << "\nErrors: " << s.errors << "\n";
  for (const auto& message : s.error_messages) out << "  " << message << "\n";
}

}  // namespace hvd::timeline
