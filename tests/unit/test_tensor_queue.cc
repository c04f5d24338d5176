// TensorQueue batches (hvd::SubmissionBatch): submissions of an open batch do not start a cycle,
// even where a lone submission would start one at once, and the batch's end makes them due
// without waiting out the longest hold.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "core/tensor_queue.h"

using hvd::detail::Request;
using hvd::detail::TensorQueue;
using hvd::detail::TensorTableEntry;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

void submit(TensorQueue& queue, const std::string& name) {
  TensorTableEntry e;
  e.name = name;
  Request r;
  r.name = name;
  REQUIRE_FALSE(queue.add({e}, {r}).has_value());
}

// A background thread's wait for due submissions, watched from the test thread.
class DueWatcher {
 public:
  explicit DueWatcher(TensorQueue& queue)
      : thread_([this, &queue] {
          due_ = queue.wait_until_due(Clock::now() + std::chrono::seconds(5));
          returned_ = true;
        }) {}
  ~DueWatcher() { thread_.join(); }
  bool returned() const { return returned_; }
  bool due() const { return due_; }
  // Whether the wait returned within `limit`.
  bool returns_within(Clock::duration limit) const {
    const auto until = Clock::now() + limit;
    while (!returned_ && Clock::now() < until) std::this_thread::sleep_for(milliseconds(1));
    return returned_;
  }

 private:
  std::atomic<bool> due_{false}, returned_{false};
  std::thread thread_;
};

}  // namespace

TEST_CASE("a lone submission outside a batch is due at once", "[tensor_queue][batch]") {
  TensorQueue queue;
  queue.set_cycle_time_ms(3000);
  DueWatcher watcher(queue);
  submit(queue, "alone");
  CHECK(watcher.returns_within(milliseconds(1000)));  // not the 3 s hold
  CHECK(watcher.due());
}

TEST_CASE("a batch's submissions wait for its end, and are due at once then", "[tensor_queue][batch]") {
  TensorQueue queue;
  queue.set_cycle_time_ms(3000);
  DueWatcher watcher(queue);
  queue.begin_batch();
  queue.begin_batch();  // nested: only the outer end counts
  for (const char* name : {"a", "b", "c"}) submit(queue, name);
  queue.end_batch();
  std::this_thread::sleep_for(milliseconds(100));
  CHECK_FALSE(watcher.returned());  // held, where the lone submission above was due at once
  queue.end_batch();
  CHECK(watcher.returns_within(milliseconds(1000)));  // at the end, not after the 3 s hold
  CHECK(watcher.due());
  CHECK(queue.pop_requests().size() == 3);
}

TEST_CASE("a submission held by the settle window ends the wait early without being due", "[tensor_queue]") {
  TensorQueue queue;
  queue.set_cycle_time_ms(3000);
  queue.set_ranks(2);
  for (int i = 0; i < 64; ++i) queue.record_cycle_start(true);  // this rank leads: it holds every start
  CHECK_FALSE(queue.has_waiting_requests());
  DueWatcher watcher(queue);
  submit(queue, "held");
  // Woken at the arrival (so the background thread can look for the cycle it will join), not
  // at the 3 s hold nor at the 5 s deadline.
  CHECK(watcher.returns_within(milliseconds(1000)));
  CHECK_FALSE(watcher.due());
  CHECK(queue.has_waiting_requests());
  CHECK_FALSE(queue.wait_until_due(Clock::now() + milliseconds(20)));  // still held
  CHECK(queue.pop_requests().size() == 1);
  CHECK_FALSE(queue.has_waiting_requests());
}
