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

namespace {

TensorTableEntry entry(const std::string& name, std::int32_t set, int handle_index = 0) {
  TensorTableEntry e;
  e.name = name;
  e.process_set_id = set;
  e.handle_index = handle_index;
  return e;
}

Request request(const std::string& name) {
  Request r;
  r.name = name;
  return r;
}

}  // namespace

TEST_CASE("an add with a name in flight adds none of its entries", "[tensor_queue]") {
  TensorQueue queue;
  REQUIRE_FALSE(queue.add({entry("b", 0)}, {request("b")}).has_value());
  // "b" is refused after "a" went in: "a" must come out again, and "c" never go in.
  const auto error =
      queue.add({entry("a", 0), entry("b", 0), entry("c", 0)}, {request("a"), request("b"), request("c")});
  REQUIRE(error.has_value());
  CHECK(error->find("tensor 'b' is already in flight on this rank") != std::string::npos);
  CHECK(queue.pop_requests().size() == 1);  // only the first add's
  // A name twice in one call is refused too, and leaves nothing behind.
  const auto twice = queue.add({entry("x", 0), entry("x", 0)}, {request("x"), request("x")});
  REQUIRE(twice.has_value());
  CHECK(twice->find("tensor 'x'") != std::string::npos);
  // So these all go in now, and come back with their names and fields.
  REQUIRE_FALSE(queue.add({entry("a", 0, 1), entry("c", 0, 2), entry("x", 0, 3)}, {}).has_value());
  const auto taken = queue.take({"x", "a", "missing", "c", "b"});
  REQUIRE(taken.size() == 4);
  CHECK(taken[0].name == "x");
  CHECK(taken[0].handle_index == 3);
  CHECK(taken[1].name == "a");
  CHECK(taken[1].handle_index == 1);
  CHECK(taken[2].name == "c");
  CHECK(taken[3].name == "b");
  CHECK(queue.take({"a"}).empty());  // taken once only
  CHECK_FALSE(queue.has_entries(0));
}

TEST_CASE("names are unique per process set, and each set's entries are its own", "[tensor_queue]") {
  TensorQueue queue;
  REQUIRE_FALSE(queue.add({entry("g", 0)}, {}).has_value());
  REQUIRE_FALSE(queue.add({entry("g", 2)}, {}).has_value());  // same name, other set
  const auto error = queue.add({entry("g", 2)}, {});
  REQUIRE(error.has_value());
  CHECK(error->find("tensor 'g' is already in flight on this rank in process set 2") != std::string::npos);
  CHECK(queue.has_entries(0));
  CHECK(queue.has_entries(2));
  CHECK_FALSE(queue.has_entries(1));
  CHECK(queue.take({"g"}, 1).empty());
  REQUIRE(queue.take({"g"}, 2).size() == 1);
  CHECK_FALSE(queue.has_entries(2));
  CHECK(queue.has_entries(0));
}

TEST_CASE("closing returns every entry by set and name, and refuses later adds", "[tensor_queue]") {
  TensorQueue queue;
  REQUIRE_FALSE(queue.add({entry("g.1", 1), entry("g.0", 1)}, {}).has_value());
  for (const char* name : {"m", "b", "z", "a"}) REQUIRE_FALSE(queue.add({entry(name, 0)}, {request(name)}).has_value());
  const auto left = queue.close("stopped for the test");
  std::vector<std::pair<std::int32_t, std::string>> got;
  for (const auto& e : left) got.emplace_back(e.process_set_id, e.name);
  const std::vector<std::pair<std::int32_t, std::string>> want{
      {0, "a"}, {0, "b"}, {0, "m"}, {0, "z"}, {1, "g.0"}, {1, "g.1"}};
  CHECK(got == want);
  CHECK_FALSE(queue.has_waiting_requests());
  CHECK(queue.add({entry("late", 0)}, {}) == std::optional<std::string>("stopped for the test"));
}

// The executor's stop (Note [An exception in the executor stops every rank]): the queue refuses
// adds before the failed op's handles wake, and the runtime's stop later takes what was in flight.
TEST_CASE("refusing adds keeps the entries in flight for the close", "[tensor_queue]") {
  TensorQueue queue;
  REQUIRE_FALSE(queue.add({entry("in.flight", 0)}, {request("in.flight")}).has_value());
  queue.refuse_adds("horovodcpp has stopped: the reason");
  CHECK(queue.add({entry("late", 0)}, {request("late")}) ==
        std::optional<std::string>("horovodcpp has stopped: the reason"));
  const auto left = queue.close("horovodcpp has stopped: the reason");
  REQUIRE(left.size() == 1);
  CHECK(left[0].name == "in.flight");
}
