// The hand-off between user threads and the background thread: the table of in-flight entries
// (by name) and the requests not yet negotiated. User threads add; the background thread pops
// requests when a cycle starts and takes entries when their response comes. Each process set has its
// own table (a name is unique within its set); requests carry their set's id. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <utility>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/settle_window.h"
#include "core/tensor_table_entry.h"

namespace hvd::detail {

class TensorQueue {
 public:
  // Adds all entries and their requests atomically (a grouped allreduce lands in one cycle).
  // Returns an error message instead when a name is already in flight or the queue is closed.
  // `accepted` runs under the queue's lock once the add is certain, before the background thread
  // can see the requests (the timeline opens their negotiations there).
  std::optional<std::string> add(std::vector<TensorTableEntry> entries, std::vector<Request> requests,
                                 const std::function<void(const std::vector<Request>&)>& accepted = {});
  // A batch of submissions on the calling thread (hvd::SubmissionBatch; nests). Its adds do not
  // wake the background thread and their intervals do not count as a burst's; while any batch is
  // open, waiting requests are held up to the longest hold. The outermost end wakes the
  // background thread and makes what waits due at once.
  void begin_batch();
  void end_batch();
  // Takes every waiting request (the cycle starts).
  std::vector<Request> pop_requests();
  // Blocks until the waiting requests are due to start a cycle (see SettleWindow) and returns
  // true; returns false at `deadline`, or early when submissions arrived since the last wait
  // returned that are not due yet (so the caller can look for other ranks' cycles more often
  // while this rank holds work). One thread waits (the background thread).
  bool wait_until_due(std::chrono::steady_clock::time_point deadline);
  // Some request waits for a cycle (held by the settle window, or due).
  bool has_waiting_requests() const;
  // The longest a submission waits for a burst to settle: HOROVOD_CYCLE_TIME, or autotune's.
  void set_cycle_time_ms(double milliseconds);
  // See SettleWindow::record_start.
  void record_cycle_start(bool ahead_of_others);
  void set_ranks(int ranks);  // the job's size, for SettleWindow::leading
  // Removes the set's entries with these names, in the order given; names not present are skipped.
  std::vector<TensorTableEntry> take(const std::vector<std::string>& names, std::int32_t process_set_id = 0);
  // Whether any entry of that set is in flight.
  bool has_entries(std::int32_t process_set_id) const;
  // Refuses further adds with `reason`; the entries in flight stay for close().
  void refuse_adds(const std::string& reason);
  // Refuses further adds with `reason` and returns every entry still in flight.
  std::vector<TensorTableEntry> close(const std::string& reason);

 private:
  mutable std::mutex mutex_;
  std::condition_variable requests_arrived_;
  // (process set id, name). While its entry waits, the name lives in the key: add moves it out
  // of the entry and take moves it back, so a submission does not copy it once more.
  using Key = std::pair<std::int32_t, std::string>;
  struct KeyHash {
    std::size_t operator()(const Key& key) const;
  };
  // Hashed: a submission looks its name up once, where an ordered map compared it with a path
  // of names that often share a long prefix (docs/benchmarks.md, "The submit path").
  using Table = std::unordered_map<Key, TensorTableEntry, KeyHash>;
  Table table_;
  std::vector<Request> requests_;
  SettleWindow settle_{std::chrono::milliseconds(1)};
  int open_batches_ = 0;  // threads inside a batch
  std::uint64_t wakes_ = 0;       // notifications of requests_arrived_
  std::uint64_t wakes_seen_ = 0;  // wakes_ when wait_until_due last looked (one waiting thread)
  bool closed_ = false;
  std::string closed_reason_;
};

}  // namespace hvd::detail
