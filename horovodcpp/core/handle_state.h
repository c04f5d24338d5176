// The shared state behind hvd::Handle: completed once by whichever thread finishes the last
// entry (background thread or GPU finalizer), waited on by user threads.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "core/status.h"
#include "horovodcpp/horovod.h"

namespace hvd::detail {

struct HandleState {
  explicit HandleState(int entries) : pending(entries), outputs(entries) {}

  // Records one entry's outcome; the first failure wins. Thread-safe.
  void complete_entry(int index, const Status& status, TensorPtr output) {
    if (record_entry(index, status, output)) wake();
  }
  // complete_entry in two halves, for a thread that completes many handles at once: it records
  // them all, then wakes the waiters of those that completed. Woken per entry, a user thread
  // waiting on the handles one by one would block again on the next, at two context switches
  // per handle (docs/benchmarks.md, "Figures behind design choices", has what that cost).
  // record_entry returns whether that entry completed the handle.
  bool record_entry(int index, const Status& status, TensorPtr output);
  void wake() { cv.notify_all(); }
  // Completes every entry still pending with `status` (the watchdog, when the background
  // thread is stuck and will never complete them). Thread-safe; later completions are ignored.
  void fail_all(const Status& status);
  bool done() const;
  Status wait() const;

  mutable std::mutex mutex;
  mutable std::condition_variable cv;
  int pending;
  Status status = Status::ok();
  std::vector<TensorPtr> outputs;
  std::vector<std::int64_t> received_splits;  // alltoall
  int join_result = -1;                       // join: the last rank that joined
  int new_process_set_id = -1;                // add_process_set: the new set's id
};

}  // namespace hvd::detail
