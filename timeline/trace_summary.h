// Aggregates a trace into what a user asks first: where the time goes per phase and op, how long
// each tensor waited in negotiation, how much was fused, the slowest tensors, and which rank was
// last to report ready and how long the others waited for it (the straggler, named by that
// time; merged all-ranks traces only, see trace_last_ready.h). Tool-side only.
#pragma once

#include <cstddef>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "timeline/trace_file.h"
#include "timeline/trace_last_ready.h"

namespace hvd::timeline {

struct SpanStats {
  std::size_t count = 0;
  double total_us = 0;
  double max_us = 0;
  void add(double us);
};

struct TensorStats {
  SpanStats ops;          // the top-level op spans (ALLREDUCE, ...)
  SpanStats negotiation;  // NEGOTIATE_<OP> spans
  std::size_t errors = 0;
};

struct TraceSummary {
  std::map<std::string, SpanStats> spans;      // every span name: phases, ops, activities
  std::map<std::string, TensorStats> tensors;  // by row (tensor) name
  std::size_t fused_ops = 0;                   // tensor ops that rode in a fused response
  std::size_t fused_responses = 0;             // distinct fused responses (args.fused_with values)
  std::size_t unfused_ops = 0;
  double bytes = 0;  // sum of args.bytes over ops
  double fused_bytes = 0;
  LastReadyStats last_ready;
  std::size_t cycles = 0;
  std::size_t errors = 0;
  std::vector<std::string> error_messages;  // the first few
  std::size_t open_spans = 0;
};

// How much print_summary shows.
struct SummaryOptions {
  std::size_t top = 10;  // rows in the per-tensor tables (the rest are counted, not shown)
};

// The rank that cost the others the most waiting (LastReadyStats::lost_us and late_entry_us,
// summed), when that is at least kStragglerFactor times what the next rank cost and at least
// kStragglerShare of the recording's length (on a busy machine, scheduling alone makes some
// rank "cost" the others up to a fifth of it); rank -1 when none stands out.
struct StragglerVerdict {
  int rank = -1;
  double total_us = 0;
  std::size_t count = 0;  // negotiations and ops in which it held the others up
};
constexpr double kStragglerFactor = 1.5;
constexpr double kStragglerShare = 0.25;
StragglerVerdict straggler_verdict(const LastReadyStats& stats);

TraceSummary summarize_trace(const TraceFile& trace);
void print_summary(const TraceFile& trace, const TraceSummary& summary, std::ostream& out,
                   const SummaryOptions& options = {});

}  // namespace hvd::timeline
