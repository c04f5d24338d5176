// Records every operation as Chrome Trace Event JSON. The background thread calls the event
// methods (cheap when disabled: one atomic load), as do the GPU finalizer thread and CUDA
// stream callbacks; a writer thread of its own ("hvd-timeline") drains a bounded queue to the
// file, so recording never blocks them for long. Owned by the Runtime; start/stop may be called
// from any thread.
//
// Rows: row 1 is the runtime's own (CYCLE slices, CYCLE_START instants); each tensor gets the
// next free id, used as both pid and tid (never 0, which Perfetto treats as the idle process /
// merges with tid 1).
// Spans reach the file as complete events once they close (timeline/span_folder.h).
//
// It depends on nothing of the core (the layering test checks it): it reports through the
// warning callback of its options and throws its own TimelineError.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace hvd {

// A recording that cannot start: the file cannot be created or written (the message names it).
class TimelineError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Receives the recorder's warnings: events dropped because the queue was full, a write that
// failed (recording then stops). Called from whichever thread stops the recording, or from the
// writer thread.
using TimelineWarning = std::function<void(const std::string& message)>;

// Extra key/value pairs shown in an event's "args" (dtype, shape, bytes, fused_with, ...).
using TimelineArgs = std::vector<std::pair<std::string, std::string>>;

// Queue bound, flush period and row memory of the recorder (tests shrink them).
struct TimelineOptions {
  // Events waiting for the writer, all kinds counted (metadata and E events included): a B or
  // an instant is dropped when it would leave no room for the E events still owed.
  std::size_t queue_capacity = 1 << 16;
  // Half of the 0.1 s that Horovod's test_timeline.py (like a user tailing the file) waits after
  // an op before reading it: with a 100 ms period the two tied, and a read could come just
  // before the write.
  std::chrono::milliseconds flush_interval{50};
  bool wake_when_half_full = true;  // tests turn it off to make an overflow deterministic
  // Tensor names whose row id is remembered once nothing is open on them (see timeline_rows.h).
  std::size_t row_capacity = 1 << 14;
  // Where warnings go; unset: one line each on standard error. The runtime passes its log.
  TimelineWarning warn;
};

class Timeline {
 public:
  Timeline();
  explicit Timeline(TimelineOptions options);
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // Starts recording to `path` for this rank (stops a running recording first). Throws
  // TimelineError naming the path when the file cannot be created.
  void start(const std::string& path, int rank, bool mark_cycles);
  // Closes every open span, writes what is queued, reports dropped events, closes the file.
  void stop();
  bool enabled() const;
  // Events dropped because the queue was full, in the running (or last) recording.
  std::uint64_t dropped_events() const;
  // Blocks until every event recorded so far is in the file (the file is then valid JSON);
  // spans still open are in its trailer, as begin events, until they close.
  void flush();

  // Negotiation of one tensor: the NEGOTIATE_<OP> span. Inside it, each rank's report opens a
  // "READY <rank>" slice that lasts until the next report (or the agreement), so the slices'
  // left edges are the moments the ranks reported, and the last one is the wait for agreement.
  // negotiate_start while that tensor's negotiation is open does nothing (the coordinator calls
  // it when any rank first reports, and when its own request leaves the queue).
  void negotiate_start(const std::string& tensor, const char* op);
  void negotiate_rank_ready(const std::string& tensor, int rank);
  void negotiate_end(const std::string& tensor);
  // Execution of one tensor: the <OP> span containing QUEUE and then activities
  // (MEMCPY_IN_FUSION_BUFFER, MPI_ALLREDUCE, ...). `args` of start_op appear on the op's begin
  // event, those of end_op on its end event (Chrome and Perfetto show both as the op's args).
  void start_op(const std::string& tensor, const char* op, const TimelineArgs& args);
  // QUEUE: the op waits behind earlier responses of its cycle. queue_end closes it when it is
  // the open span and does nothing otherwise; activity_start closes an open QUEUE first.
  void queue_start(const std::string& tensor);
  void queue_end(const std::string& tensor);
  void activity_start(const std::string& tensor, const char* activity);
  void activity_end(const std::string& tensor);
  // Ends the innermost activity and opens `next` at the same instant; nothing when no activity
  // is open (for phase changes a GPU stream reaches later: timeline/timeline_cuda.h).
  void switch_activity(const std::string& tensor, const char* next);
  void end_op(const std::string& tensor, const TimelineArgs& args);
  // Ends the runtime row's current CYCLE slice (if any) and opens the next one, whose start a
  // CYCLE_START instant also marks (Horovod's name for it).
  void mark_cycle_start();

  // Tensor rows currently remembered (bounded by TimelineOptions::row_capacity plus the rows
  // with spans open); for tests and diagnostics.
  std::size_t remembered_rows() const;

 private:
  void stop_locked_by_caller();  // stop(); the caller holds the control lock

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hvd
