// Records every operation as Chrome Trace Event JSON. The background thread calls the event
// methods (cheap when disabled: one atomic load); a writer thread of its own drains a bounded
// queue to the file, so recording never blocks the background thread for long. Owned by the
// Runtime; start/stop may be called from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace hvd {

// Extra key/value pairs shown in an event's "args" (dtype, shape, bytes, fused_with, ...).
using TimelineArgs = std::vector<std::pair<std::string, std::string>>;

// Queue bound and flush period of the writer thread (tests shrink them).
struct TimelineOptions {
  std::size_t queue_capacity = 1 << 16;  // events waiting for the writer; beyond it, dropped
  std::chrono::milliseconds flush_interval{100};
  bool wake_when_half_full = true;  // tests turn it off to make an overflow deterministic
};

class Timeline {
 public:
  Timeline();
  explicit Timeline(TimelineOptions options);
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // Starts recording to `path` for this rank (stops a running recording first).
  void start(const std::string& path, int rank, bool mark_cycles);
  // Closes every open span, writes what is queued, reports dropped events, closes the file.
  void stop();
  bool enabled() const;
  // Events dropped because the queue was full, in the running (or last) recording.
  std::uint64_t dropped_events() const;
  // Blocks until every event recorded so far is in the file (the file is then valid JSON).
  void flush();

  // Negotiation of one tensor: NEGOTIATE_<OP> span, with an instant per rank as it reports ready.
  // negotiate_start while that tensor's negotiation is open does nothing (the coordinator calls
  // it when any rank first reports, and when its own request leaves the queue).
  void negotiate_start(const std::string& tensor, const char* op);
  void negotiate_rank_ready(const std::string& tensor, int rank);
  void negotiate_end(const std::string& tensor);
  // Execution of one tensor: the <OP> span containing activities (QUEUE,
  // MEMCPY_IN_FUSION_BUFFER, MPI_ALLREDUCE, ...). `args` appear on the op's begin event.
  void start_op(const std::string& tensor, const char* op, const TimelineArgs& args);
  void activity_start(const std::string& tensor, const char* activity);
  void activity_end(const std::string& tensor);
  void end_op(const std::string& tensor, const TimelineArgs& args);
  void mark_cycle_start();

 private:
  void stop_locked_by_caller();  // stop(); the caller holds the control lock

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hvd
