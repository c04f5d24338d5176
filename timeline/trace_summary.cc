#include "timeline/trace_summary.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <set>
#include <utility>

#include "timeline/trace_nesting.h"

namespace hvd::timeline {
namespace {

constexpr std::size_t kMaxErrorMessages = 5;
const std::string kNegotiatePrefix = "NEGOTIATE_";
const std::string kReadyPrefix = "READY ";  // a rank's report inside a negotiation
const std::string kCycle = "CYCLE";         // a background cycle, on the runtime row

struct OpenSpan {
  std::string name;
  double ts;
  const JsonValue* begin;
};

struct RowState {
  std::string label;
  std::vector<OpenSpan> open;
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
  void count_op(const RowState& row, const OpenSpan& span, const JsonValue& end);
  void mark_cycle(const JsonValue& event, double ts);

  std::map<std::string, std::string> labels_;
  std::map<std::string, RowState> rows_;
  std::map<std::string, std::set<std::string>> fused_open_;  // rows in the current response
  std::set<std::string> rank_groups_;
  // A cycle is its row and start (ns): a file may mark it with a CYCLE slice, a CYCLE_START
  // instant (Horovod's, and older horovodcpp files) or both, and counts once.
  std::set<std::pair<std::string, std::int64_t>> cycle_starts_;
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
  } else if (phase == "i" || phase == "I") {
    if (string_field(event, "name") == "CYCLE_START") mark_cycle(event, *ts);
  }
}

void Summarizer::mark_cycle(const JsonValue& event, double ts) {
  cycle_starts_.emplace(row_key(event), std::llround(ts * 1000.0));
}

void Summarizer::close_span(RowState& state, const OpenSpan& span, const JsonValue& end) {
  const double us = number_field(end, "ts").value_or(span.ts) - span.ts;
  if (span.name == kCycle && state.open.empty()) {  // marks, not work
    mark_cycle(*span.begin, span.ts);
    return;
  }
  if (starts_with(span.name, kReadyPrefix)) return;
  summary_.spans[span.name].add(us);
  if (!state.open.empty()) return;  // an activity inside an op
  TensorStats& tensor = summary_.tensors[state.label];
  if (starts_with(span.name, kNegotiatePrefix)) {
    tensor.negotiation.add(us);
  } else {
    tensor.ops.add(us);
    count_op(state, span, end);
  }
}

// An op's argument: the E event's args win over the B event's, as in Chrome and Perfetto.
const JsonValue* op_arg(const JsonValue& begin, const JsonValue& end, const char* key) {
  for (const JsonValue* event : {&end, &begin}) {
    const JsonValue* args = event->find("args");
    const JsonValue* value = args != nullptr ? args->find(key) : nullptr;
    if (value != nullptr) return value;
  }
  return nullptr;
}

void Summarizer::count_op(const RowState& state, const OpenSpan& span, const JsonValue& end) {
  const JsonValue& begin = *span.begin;
  const double bytes = numeric_arg(end, "bytes").value_or(numeric_arg(begin, "bytes").value_or(0));
  summary_.bytes += bytes;
  const JsonValue* fused = op_arg(begin, end, "fused_with");
  if (fused != nullptr) {
    ++summary_.fused_ops;
    summary_.fused_bytes += bytes;
    const std::string pid = begin.find("pid") ? begin.find("pid")->dump() : "";
    // fused_with need not be unique per response (the same tensors fuse alike every step): a
    // response ends when one of its tensors shows up again with the same fused_with.
    std::set<std::string>& tensors =
        fused_open_[(rank_groups_.count(pid) ? pid : "") + "|" + fused->dump()];
    if (!tensors.insert(state.label).second) {
      ++summary_.fused_responses;
      tensors = {state.label};
    }
  } else if (span.name != "ERROR") {
    ++summary_.unfused_ops;
  }
  const JsonValue* error = op_arg(begin, end, "error");
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
  summary_.cycles = cycle_starts_.size();
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

// Prints the `top` tensors with the largest `key` among those `has` selects, largest first,
// and how many more there were.
template <class Has, class Key, class Stats>
void print_top(const TraceSummary& s, std::size_t top, std::ostream& out, Has has, Key key,
               Stats stats) {
  std::vector<std::pair<std::string, TensorStats>> rows;
  for (const auto& entry : s.tensors) {
    if (has(entry.second)) rows.push_back(entry);
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [&](const auto& a, const auto& b) { return key(a.second) > key(b.second); });
  for (std::size_t i = 0; i < rows.size() && i < top; ++i) {
    print_row(out, rows[i].first, stats(rows[i].second));
  }
  if (rows.size() > top) {
    out << "  ... " << rows.size() - top << " more tensor(s) not shown (--top N shows more)\n";
  }
}

void print_fusion(const TraceSummary& s, std::ostream& out) {
  out << "\nFusion: " << s.fused_ops << " tensor op(s) rode in " << s.fused_responses
      << " fused response(s)";
  if (s.fused_responses > 0) {
    out << " (mean " << static_cast<double>(s.fused_ops) / s.fused_responses << " tensors, "
        << s.fused_bytes / s.fused_responses << " bytes per response)";
  }
  out << "; " << s.unfused_ops << " op(s) ran unfused; " << s.bytes << " bytes in all\n";
}

double sum(const std::vector<double>& values) {
  double total = 0;
  for (double v : values) total += v;
  return total;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  const std::size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  if (values.size() % 2 == 1) return values[mid];
  const double upper = values[mid];
  return (*std::max_element(values.begin(), values.begin() + mid) + upper) / 2;
}

std::string percent(std::size_t part, std::size_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f%%", whole > 0 ? 100.0 * part / whole : 0.0);
  return buf;
}

// Per rank: in how many negotiations it alone was last, and the time the others waited for it
// there (total and median). The straggler is named by that time, summed.
void print_last_ready(const LastReadyStats& r, std::ostream& out) {
  out << "\nLast rank ready";
  if (!r.merged) {
    out << ": not computed for a single-rank file. It needs every rank's own ready time:\n"
           "  record with HOROVOD_TIMELINE_ALL_RANKS=1, then summarise the output of\n"
           "  hvd-timeline merge PATH.rank0 PATH.rank1 ... -o merged.json\n";
    return;
  }
  out << " (each rank's own ready time, over " << r.negotiations << " negotiation(s) seen by 2+ "
      << "ranks; " << r.ties << " tie(s), counted for nobody):\n";
  if (r.by_cycle < r.negotiations) {
    out << "  " << r.negotiations - r.by_cycle << " of them compared by timestamp (no cycle"
        << " marks): a rank whose cycles start a little later looks last; record with\n"
        << "  HOROVOD_TIMELINE_MARK_CYCLES=1 to count ranks ready in the same cycle as a tie\n";
  }
  const StragglerVerdict verdict = straggler_verdict(r);
  std::set<int> ranks;
  for (const auto& entry : r.last) ranks.insert(entry.first);
  for (const auto& entry : r.lost_us) ranks.insert(entry.first);
  for (const auto& entry : r.late_entry_us) ranks.insert(entry.first);
  out << "  time lost: how much later than all others a rank reported ready, or began the agreed\n"
      << "  collective, less one cycle period, at least 1 ms (" << ms(r.cycle_us) << " ms"
      << (r.cycle_us > 0 ? "" : ": no cycle marks") << "):\n";
  const auto times_of = [](const std::map<int, std::vector<double>>& by_rank, int rank) {
    const auto it = by_rank.find(rank);
    return it != by_rank.end() ? it->second : std::vector<double>();
  };
  char buf[320];
  for (int rank : ranks) {
    const auto last = r.last.find(rank);
    const std::size_t count = last != r.last.end() ? last->second : 0;
    const std::vector<double> ready = times_of(r.lost_us, rank);
    const std::vector<double> entry = times_of(r.late_entry_us, rank);
    std::vector<double> all = ready;
    all.insert(all.end(), entry.begin(), entry.end());
    std::snprintf(buf, sizeof(buf),
                  "  rank %d: last in %zu (%s); the others waited for it %s ms in all, median %s ms"
                  " (reporting late %s ms in %zu negotiation(s), entering late %s ms in %zu op(s))\n",
                  rank, count, percent(count, r.negotiations).c_str(), ms(sum(all)).c_str(),
                  ms(median(all)).c_str(), ms(sum(ready)).c_str(), ready.size(),
                  ms(sum(entry)).c_str(), entry.size());
    out << buf;
  }
  if (verdict.rank >= 0) {
    out << "  straggler (most time lost): rank " << verdict.rank << " (" << ms(verdict.total_us)
        << " ms in " << verdict.count << " negotiation(s) and op(s))\n";
  } else {
    char line[200];
    std::snprintf(line, sizeof(line),
                  "  straggler: none stands out (none cost the others %.1fx what the next rank did"
                  " and %.0f%% of the %s ms recorded)\n",
                  kStragglerFactor, kStragglerShare * 100, ms(r.recorded_us).c_str());
    out << line;
  }
}

}  // namespace

StragglerVerdict straggler_verdict(const LastReadyStats& r) {
  std::map<int, std::pair<double, std::size_t>> lost;  // rank -> (us, count)
  for (const auto* by_rank : {&r.lost_us, &r.late_entry_us}) {
    for (const auto& [rank, times] : *by_rank) {
      lost[rank].second += times.size();
      for (double us : times) lost[rank].first += us;
    }
  }
  StragglerVerdict best;
  double runner_up = 0;
  for (const auto& [rank, total] : lost) {
    if (total.first > best.total_us) {
      runner_up = best.total_us;
      best = {rank, total.first, total.second};
    } else {
      runner_up = std::max(runner_up, total.first);
    }
  }
  if (best.rank >= 0 && (best.total_us < kStragglerFactor * runner_up ||
                         best.total_us < kStragglerShare * r.recorded_us)) {
    best = {};  // nobody cost the others clearly more than the rest did
  }
  return best;
}

void SpanStats::add(double us) {
  ++count;
  total_us += us;
  max_us = std::max(max_us, us);
}

TraceSummary summarize_trace(const TraceFile& trace) {
  Summarizer summarizer(trace);
  const std::vector<JsonValue> events = nested_events(trace.events);  // X as B/E pairs
  for (const auto& event : events) summarizer.add(event);
  TraceSummary summary = summarizer.finish();
  summary.last_ready = last_ready_stats(trace);
  return summary;
}

void print_summary(const TraceFile& trace, const TraceSummary& s, std::ostream& out,
                   const SummaryOptions& options) {
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
  print_top(
      s, options.top, out, [](const TensorStats& t) { return t.negotiation.count > 0; },
      [](const TensorStats& t) { return t.negotiation.total_us; },
      [](const TensorStats& t) { return t.negotiation; });
  print_header(out, "Slowest tensors (longest single op first):");
  print_top(
      s, options.top, out, [](const TensorStats& t) { return t.ops.count > 0; },
      [](const TensorStats& t) { return t.ops.max_us; }, [](const TensorStats& t) { return t.ops; });
  print_fusion(s, out);
  print_last_ready(s.last_ready, out);
  out << "\nErrors: " << s.errors << "\n";
  for (const auto& message : s.error_messages) out << "  " << message << "\n";
}

}  // namespace hvd::timeline
