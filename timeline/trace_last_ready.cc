#include "timeline/trace_last_ready.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "timeline/trace_nesting.h"

namespace hvd::timeline {
namespace {

std::string id_of(const JsonValue& event, const char* key) {
  const JsonValue* value = event.find(key);
  return value != nullptr ? value->dump() : "?";
}

// Nanoseconds: the recorder's resolution, so equal times stay equal after merge's shift.
std::int64_t ns(double us) { return std::llround(us * 1000.0); }

// One negotiation as one rank saw it.
struct Negotiation {
  bool has_ready = false;
  std::int64_t ready = 0;  // its own first ready instant
  std::int64_t end = 0;    // the end of its NEGOTIATE span
};

// One op as one rank ran it: when its collective (the first activity that is not a memcpy)
// began.
struct Op {
  bool has_start = false;
  std::int64_t start = 0;
};

// What one rank group of the merged trace holds.
struct Group {
  int rank = 0;
  std::vector<std::int64_t> cycles;                          // its cycle starts, sorted, distinct
  std::map<std::string, std::vector<Negotiation>> tensors;  // by tensor name
  std::map<std::string, std::vector<Op>> ops;                // by tensor name
};

// A row being read: the tensor and the negotiation or op open on it, if any.
struct RowCursor {
  std::string tensor;
  int depth = 0;             // open B spans
  bool negotiating = false;  // the outermost open span is NEGOTIATE_<OP>
  bool in_op = false;        // the outermost open span is an op
  Negotiation current;
  Op op;
};

// Reads a merged trace into its rank groups: their cycle marks and each tensor's negotiations.
// Used once by last_ready_stats, on the tool's thread.
class Reader {
 public:
  explicit Reader(const TraceFile& trace);
  std::map<std::string, Group> groups;  // by pid
  std::int64_t first_ns = INT64_MAX, last_ns = INT64_MIN;  // the recording's extent

 private:
  void add(const JsonValue& event);
  std::map<std::string, RowCursor> rows_;  // "pid/tid" -> row
};

Reader::Reader(const TraceFile& trace) {
  for (const auto& event : trace.events) {
    if (string_field(event, "ph") != "M") continue;
    const std::string name = string_field(event, "name");
    if (name == "hvd_rank_group") {
      if (auto rank = numeric_arg(event, "rank")) groups[id_of(event, "pid")].rank = int(*rank);
    } else if (name == "thread_name") {
      rows_[id_of(event, "pid") + "/" + id_of(event, "tid")].tensor =
          event.find("args") && event.find("args")->find("name")
              ? event.find("args")->find("name")->as_string()
              : "";
    }
  }
  if (groups.empty()) return;
  for (const auto& event : nested_events(trace.events)) add(event);
  // A cycle marked both by its CYCLE slice and by the CYCLE_START instant at the slice's start
  // (the recorder writes both) is one cycle: one start time.
  for (auto& entry : groups) {
    std::vector<std::int64_t>& cycles = entry.second.cycles;
    std::sort(cycles.begin(), cycles.end());
    cycles.erase(std::unique(cycles.begin(), cycles.end()), cycles.end());
  }
}

void Reader::add(const JsonValue& event) {
  const std::string phase = string_field(event, "ph");
  const auto ts = number_field(event, "ts");
  auto group = groups.find(id_of(event, "pid"));
  if (phase == "M" || !ts || group == groups.end()) return;
  first_ns = std::min(first_ns, ns(*ts));
  last_ns = std::max(last_ns, ns(*ts));
  const std::string name = string_field(event, "name");
  // Cycle marks: CYCLE slices, CYCLE_START instants (Horovod's; older files hold only these), or
  // both at the same time.
  if ((phase == "B" && name == "CYCLE") ||
      ((phase == "i" || phase == "I") && name == "CYCLE_START")) {
    group->second.cycles.push_back(ns(*ts));
    return;
  }
  auto row = rows_.find(id_of(event, "pid") + "/" + id_of(event, "tid"));
  if (row == rows_.end()) return;
  RowCursor& r = row->second;
  // A rank's report: a READY slice inside the negotiation (now), or an instant (older files).
  const bool report = (phase == "B" && r.depth == 1 && name.rfind("READY ", 0) == 0) ||
                      phase == "i" || phase == "I";
  if (report) {
    const auto rank = numeric_arg(event, "rank");
    if (r.negotiating && !r.current.has_ready && rank && int(*rank) == group->second.rank) {
      r.current = {true, ns(*ts), 0};
    }
  }
  if (phase == "B") {
    if (r.depth == 0 && name.rfind("NEGOTIATE_", 0) == 0) {
      r.negotiating = true;
      r.current = {};
    } else if (r.depth == 0) {
      r.in_op = true;
      r.op = {};
    } else if (r.depth == 1 && r.in_op && !r.op.has_start && name != "QUEUE" &&
               name.rfind("MEMCPY", 0) != 0) {
      r.op = {true, ns(*ts)};
    }
    ++r.depth;
  } else if (phase == "E" && r.depth > 0) {
    if (--r.depth == 0 && r.negotiating) {
      r.current.end = ns(*ts);
      group->second.tensors[r.tensor].push_back(r.current);
      r.negotiating = false;
    } else if (r.depth == 0 && r.in_op) {
      group->second.ops[r.tensor].push_back(r.op);
      r.in_op = false;
    }
  }
}

// True when no cycle of the rank started after its ready instant, up to the negotiation's end.
bool in_final_cycle(const std::vector<std::int64_t>& cycles, const Negotiation& n) {
  auto next = std::upper_bound(cycles.begin(), cycles.end(), n.ready);
  return next == cycles.end() || *next > n.end;
}

// The k-th negotiation of one tensor on the ranks that saw it: (group, negotiation) pairs.
using Round = std::vector<std::pair<const Group*, const Negotiation*>>;

// The typical cycle period (ns): the median gap between consecutive cycle starts over every rank;
// 0 without marks.
std::int64_t typical_cycle(const std::map<std::string, Group>& groups) {
  std::vector<std::int64_t> gaps;
  for (const auto& entry : groups) {
    const auto& c = entry.second.cycles;
    for (std::size_t i = 1; i < c.size(); ++i) gaps.push_back(c[i] - c[i - 1]);
  }
  if (gaps.empty()) return 0;
  std::nth_element(gaps.begin(), gaps.begin() + gaps.size() / 2, gaps.end());
  return gaps[gaps.size() / 2];
}

void count_round(const Round& round, std::int64_t cycle, LastReadyStats& stats) {
  bool cycles = true;
  for (const auto& [group, n] : round) cycles = cycles && !group->cycles.empty();
  std::vector<int> last;
  std::int64_t latest = INT64_MIN;
  for (const auto& [group, n] : round) {
    if (cycles) {
      if (in_final_cycle(group->cycles, *n)) last.push_back(group->rank);
    } else if (n->ready >= latest) {
      if (n->ready > latest) last.clear();
      latest = n->ready;
      last.push_back(group->rank);
    }
  }
  ++stats.negotiations;
  if (cycles) ++stats.by_cycle;
  if (last.size() == 1) {
    ++stats.last[last.front()];
  } else {
    ++stats.ties;
  }
  // Time: how much later than every other rank the latest one reported, less one cycle period
  // (within a cycle, which rank looks later is the phase of their cycles, not a wait). Counted
  // apart from the cycle rule above, which calls a wait a tie when the waiting rank started no
  // cycle meanwhile (an idle runtime sleeps until work arrives).
  const auto first = std::max_element(round.begin(), round.end(), [](const auto& a, const auto& b) {
    return a.second->ready < b.second->ready;
  });
  std::int64_t others = INT64_MIN;
  for (auto it = round.begin(); it != round.end(); ++it) {
    if (it != first) others = std::max(others, it->second->ready);
  }
  const std::int64_t excess = first->second->ready - others - cycle;
  if (excess > 0) stats.lost_us[first->first->rank].push_back(double(excess) / 1000.0);
}

// The k-th op of one tensor on every rank that ran it: the rank that began the collective last
// kept the others waiting inside it (a rank frozen after it reported, before the data moved).
void count_op_round(const std::vector<std::pair<const Group*, const Op*>>& round,
                    std::int64_t cycle, LastReadyStats& stats) {
  const auto last = std::max_element(round.begin(), round.end(), [](const auto& a, const auto& b) {
    return a.second->start < b.second->start;
  });
  std::int64_t others = INT64_MIN;
  for (auto it = round.begin(); it != round.end(); ++it) {
    if (it != last) others = std::max(others, it->second->start);
  }
  const std::int64_t excess = last->second->start - others - cycle;
  if (excess > 0) stats.late_entry_us[last->first->rank].push_back(double(excess) / 1000.0);
}

}  // namespace

LastReadyStats last_ready_stats(const TraceFile& trace) {
  LastReadyStats stats;
  const Reader reader(trace);
  if (reader.groups.empty()) return stats;
  stats.merged = true;
  // Cycles start on demand, so on a loaded machine their period can be shorter than the jitter
  // of the ranks' scheduling: what is taken off is at least a millisecond.
  constexpr std::int64_t kSchedulingJitterNs = 1000000;
  std::int64_t cycle = typical_cycle(reader.groups);
  if (cycle > 0) cycle = std::max(cycle, kSchedulingJitterNs);
  stats.cycle_us = double(cycle) / 1000.0;
  if (reader.last_ns > reader.first_ns) stats.recorded_us = double(reader.last_ns - reader.first_ns) / 1000.0;
  std::map<std::string, std::vector<const Group*>> seen_by;  // tensor -> groups with it
  for (const auto& entry : reader.groups) {
    for (const auto& tensor : entry.second.tensors) seen_by[tensor.first].push_back(&entry.second);
  }
  for (const auto& [tensor, groups] : seen_by) {
    if (groups.size() < 2) continue;
    std::size_t rounds = SIZE_MAX;
    for (const Group* g : groups) rounds = std::min(rounds, g->tensors.at(tensor).size());
    for (std::size_t k = 0; k < rounds; ++k) {
      Round round;
      for (const Group* g : groups) {
        const Negotiation& n = g->tensors.at(tensor)[k];
        if (n.has_ready) round.emplace_back(g, &n);
      }
      if (round.size() >= 2) count_round(round, cycle, stats);
    }
  }
  std::map<std::string, std::vector<const Group*>> ran_by;  // tensor -> groups with ops of it
  for (const auto& entry : reader.groups) {
    for (const auto& tensor : entry.second.ops) ran_by[tensor.first].push_back(&entry.second);
  }
  for (const auto& [tensor, groups] : ran_by) {
    if (groups.size() < 2) continue;
    std::size_t rounds = SIZE_MAX;
    for (const Group* g : groups) rounds = std::min(rounds, g->ops.at(tensor).size());
    for (std::size_t k = 0; k < rounds; ++k) {
      std::vector<std::pair<const Group*, const Op*>> round;
      for (const Group* g : groups) {
        const Op& op = g->ops.at(tensor)[k];
        if (op.has_start) round.emplace_back(g, &op);
      }
      if (round.size() >= 2) count_op_round(round, cycle, stats);
    }
  }
  return stats;
}

}  // namespace hvd::timeline
