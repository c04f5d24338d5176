// Which rank was last to report a tensor ready, negotiation by negotiation: the straggler the
// others waited for. Computed only from a merged all-ranks trace (hvd-timeline merge of the
// HOROVOD_TIMELINE_ALL_RANKS=1 files), from each rank's OWN ready instant -- the one every rank
// records when its request leaves its queue, the first such instant in each of its
// NEGOTIATE_<OP> spans -- on the common clock merge puts the groups on. The instants the
// coordinator records for other ranks are not used: it notes them in the order it reads the
// gathered lists, not in the order the ranks became ready, and it sees none for tensors the
// response cache settles. A tensor's k-th negotiation on one rank is compared with its k-th on
// every other rank.
//
// Resolution: a request leaves its queue only when a background cycle starts, and each rank's
// cycles run at a steady phase of their own, so the rank whose cycles start a little later
// would look "last" in nearly every negotiation by raw timestamps. With CYCLE_START marks
// (HOROVOD_TIMELINE_MARK_CYCLES=1, or hvd::start_timeline(path, true)) on every compared rank,
// the ranks whose request left its queue in the cycle that ended the negotiation (no cycle of
// theirs started between their ready instant and their negotiation's end) are the last; without
// marks the latest timestamp is. Either way, two or more ranks at the last place is a tie,
// counted for nobody.
//
// Time lost: in each negotiation the rank that reported latest cost the others the time from
// the latest of their reports to its own, less one typical cycle period (the median gap between
// cycle starts; a lag within a cycle is the cycles' phase, not a wait). A rank can also hold the
// others up after it reported: frozen before it starts the agreed collective, which the others
// entered already. That is counted the same way per op, from the collective's start (the first
// activity that is not a memcpy). Summary names the straggler by the two times, summed: a count
// of negotiations favours a rank that is last often by a hair over one that is last less often
// by a whole pause. Reads READY slices (and the ready instants older files hold), and cycle
// marks: CYCLE slices and CYCLE_START instants, a cycle marked by both counted once by its start.
// Tool-side only.
#pragma once

#include <cstddef>
#include <map>
#include <vector>

#include "timeline/trace_file.h"

namespace hvd::timeline {

struct LastReadyStats {
  bool merged = false;              // the trace has rank groups; otherwise nothing was counted
  std::map<int, std::size_t> last;  // rank -> negotiations in which it alone was last
  // rank -> for each negotiation in which it reported latest by more than a cycle period, by
  // how much more (us): the time the others waited for it.
  std::map<int, std::vector<double>> lost_us;
  // rank -> for each op whose collective it began last by more than a cycle period, by how
  // much more (us): the others waited for it inside the collective.
  std::map<int, std::vector<double>> late_entry_us;
  double cycle_us = 0;     // taken off: the typical cycle period, at least 1 ms (0 without cycle marks)
  double recorded_us = 0;  // from the first to the last timed event of the merged trace
  std::size_t negotiations = 0;     // negotiations compared (2+ ranks with their own instant)
  std::size_t ties = 0;             // of those, ones where 2+ ranks share the last place
  std::size_t by_cycle = 0;         // of those, ones resolved by cycle marks (else timestamps)
};

LastReadyStats last_ready_stats(const TraceFile& trace);

}  // namespace hvd::timeline
