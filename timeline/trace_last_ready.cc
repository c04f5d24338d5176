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

// What one rank group of the merged trace holds.
struct Group {
  int rank = 0;
  std::vector<std::int64_t> cycles;                          // its CYCLE_START marks, in order
  std::map<std::string, std::vector<Negotiation>> tensors;  // by tensor name
};

// A row being read: the tensor and the negotiation open on it, if any.
struct RowCursor {
  std::string tensor;
  int depth = 0;             // open B spans
  bool negotiating = false;  // the outermost open span is NEGOTIATE_<OP>
  Negotiation current;
};

// Reads a merged trace into its rank groups: their cycle marks and each tensor's negotiations.
// Used once by last_ready_stats, on the tool's thread.
class Reader {
 public:
  explicit Reader(const TraceFile& trace);
  std::map<std::string, Group> groups;  // by pid

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
}

void Reader::add(const JsonValue& event) {
  const std::string phase = string_field(event, "ph");
  const auto ts = number_field(event, "ts");
  auto group = groups.find(id_of(event, "pid"));
  if (phase == "M" || !ts || group == groups.end()) return;
  const std::string name = string_field(event, "name");
  // Cycle marks: CYCLE slices (now) or CYCLE_START instants (older files).
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
    if (r.depth++ == 0 && name.rfind("NEGOTIATE_", 0) == 0) {
      r.negotiating = true;
      r.current = {};
    }
  } else if (phase == "E" && r.depth > 0) {
    if (--r.depth == 0 && r.negotiating) {
      r.current.end = ns(*ts);
      group->second.tensors[r.tensor].push_back(r.current);
      r.negotiating = false;
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

void count_round(const Round& round, LastReadyStats& stats) {
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
  if (last.size() != 1) {
    ++stats.ties;
    return;
  }
  // How long the others waited for the last one: its report after the latest of theirs.
  std::int64_t own = 0, others = INT64_MIN;
  for (const auto& [group, n] : round) {
    if (group->rank == last.front()) {
      own = n->ready;
    } else {
      others = std::max(others, n->ready);
    }
  }
  ++stats.last[last.front()];
  stats.lost_us[last.front()].push_back(own > others ? double(own - others) / 1000.0 : 0.0);
}

}  // namespace

LastReadyStats last_ready_stats(const TraceFile& trace) {
  LastReadyStats stats;
  const Reader reader(trace);
  if (reader.groups.empty()) return stats;
  stats.merged = true;
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
      if (round.size() >= 2) count_round(round, stats);
    }
  }
  return stats;
}

}  // namespace hvd::timeline
