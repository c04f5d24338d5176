// Cycles start on demand (the CyclePacer over the fake channel, driving the real Controller): any
// rank's work starts a cycle for all, nobody's work starts none, a rank that arrives late is
// waited for, and a burst that one rank splits across two cycles is released in the same order
// everywhere.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <mutex>
#include <thread>

#include "controller_harness.h"
#include "core/cycle_pacer.h"
#include "core/settle_window.h"

using hvd::detail::Controller;
using hvd::detail::Request;
using hvd::detail::SettleWindow;
using hvd::test::allreduce_request;
using hvd::test::names_of;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

// A submission a simulated rank makes `after` the run began.
struct Submission {
  milliseconds after;
  std::vector<std::string> names;
};

struct RankLog {
  std::vector<std::vector<std::string>> released;  // per cycle
  std::vector<int> requests_per_cycle;
  Clock::duration first_cycle_took{};  // from the run's start to the first cycle's end
};

// A rank whose only reason for a cycle is its script's next submission (so it expects its own
// work first, and looks for the others' starts at the longest interval).
class ScriptedDemand final : public hvd::detail::CyclePacer::Demand {
 public:
  explicit ScriptedDemand(std::function<bool()> due) : due_(std::move(due)) {}
  bool wait_until_due(Clock::time_point deadline) override {
    if (due_()) return true;
    std::this_thread::sleep_until(deadline);
    return due_();
  }
  bool stop_wanted() override { return false; }
  bool busy() override { return false; }
  bool awaiting_others() override { return false; }
  bool holds_submissions() override { return false; }
  bool left_out_of_a_set() override { return false; }

 private:
  std::function<bool()> due_;
};

// One thread per rank, each a small copy of the Runtime's loop: wait for a cycle start (asking
// when a submission is due), negotiate what was submitted, and stop once `last` was released.
std::vector<RankLog> run_ranks(int size, const std::vector<std::vector<Submission>>& script, const std::string& last,
                               std::vector<int>* starters, std::vector<milliseconds> late_start = {}) {
  auto rendezvous = std::make_shared<hvd::test::Rendezvous>(size);
  std::vector<RankLog> logs(size);
  std::vector<std::thread> threads;
  // One clock for every rank, so submissions scripted for the same moment are due together.
  const auto begin = Clock::now();
  for (int rank = 0; rank < size; ++rank)
    threads.emplace_back([&, rank] {
      if (rank < static_cast<int>(late_start.size())) std::this_thread::sleep_for(late_start[rank]);
      hvd::test::FakeChannel channel(rendezvous, rank);
      Controller controller(channel, {});
      hvd::detail::CyclePacer pacer(channel, nullptr);
      std::size_t next = 0;  // the next submission of this rank's script
      auto due = [&] { return next < script[rank].size() && Clock::now() >= begin + script[rank][next].after; };
      ScriptedDemand demand(due);
      bool done = false;
      while (!done) {
        pacer.wait_for_start(demand);
        std::vector<Request> requests;
        while (due()) {
          for (const auto& name : script[rank][next].names) requests.push_back(allreduce_request(name, {4}));
          ++next;
        }
        logs[rank].requests_per_cycle.push_back(static_cast<int>(requests.size()));
        const auto list = controller.compute_response_list(std::move(requests), false);
        if (logs[rank].released.empty()) logs[rank].first_cycle_took = Clock::now() - begin;
        logs[rank].released.push_back(names_of(list));
        for (const auto& name : logs[rank].released.back()) done = done || name == last;
      }
    });
  for (auto& t : threads) t.join();
  *starters = rendezvous->starters();
  return logs;
}

}  // namespace

TEST_CASE("a cycle starts when any one rank has work, and not before", "[cycle_start]") {
  for (int starter = 0; starter < 3; ++starter) {
    // Only `starter` submits at first; the others submit 60 ms later.
    std::vector<std::vector<Submission>> script(3);
    for (int rank = 0; rank < 3; ++rank)
      script[rank].push_back({rank == starter ? milliseconds(0) : milliseconds(60), {"t"}});
    std::vector<int> starters;
    const auto logs = run_ranks(3, script, "t", &starters);
    INFO("starter " << starter);
    // The starter's lone submission started cycle 0 for everybody (nothing is ready yet); the
    // others' submissions started cycle 1, which released it. No cycle ran without work.
    REQUIRE(starters.size() == 2);
    CHECK(starters[0] == starter);
    CHECK(starters[1] != starter);
    for (int rank = 0; rank < 3; ++rank) {
      CHECK(logs[rank].released == std::vector<std::vector<std::string>>{{}, {"t"}});
      CHECK(logs[rank].requests_per_cycle == std::vector<int>{rank == starter ? 1 : 0, rank == starter ? 0 : 1});
    }
  }
}

TEST_CASE("a rank that reaches the loop late is waited for, and the cycle completes", "[cycle_start]") {
  std::vector<std::vector<Submission>> script(3, {{milliseconds(0), {"a"}}});
  std::vector<int> starters;
  const auto logs = run_ranks(3, script, "a", &starters, {milliseconds(0), milliseconds(0), milliseconds(120)});
  REQUIRE(starters.size() == 1);
  CHECK(starters[0] != 2);  // an on-time rank asked; the late one joined it
  for (int rank = 0; rank < 3; ++rank) CHECK(logs[rank].released == std::vector<std::vector<std::string>>{{"a"}});
  // The on-time ranks waited inside the cycle for the late one rather than failing or spinning
  // through empty cycles.
  CHECK(logs[0].first_cycle_took >= milliseconds(80));
  CHECK(logs[1].first_cycle_took >= milliseconds(80));
}

TEST_CASE("a burst split across two cycles on one rank is released in the same order everywhere", "[cycle_start]") {
  // Two steps of the same ten tensors: the first negotiated through the coordinator, the second
  // from the response cache. Each step, one rank's burst arrives in two halves 40 ms apart
  // (rank 1 in step 1, rank 0 in step 2), so each step takes two cycles.
  std::vector<std::string> first_half, second_half, step2_first, step2_second;
  for (int i = 0; i < 5; ++i) first_half.push_back("b" + std::to_string(i));
  for (int i = 5; i < 10; ++i) second_half.push_back("b" + std::to_string(i));
  std::vector<std::string> all = first_half;
  all.insert(all.end(), second_half.begin(), second_half.end());
  // Step 2 under new names would miss the cache: the same names again, after step 1 was released.
  std::vector<std::vector<Submission>> script(2);
  script[0] = {{milliseconds(0), all}, {milliseconds(200), first_half}, {milliseconds(240), second_half},
               {milliseconds(400), {"end"}}};
  script[1] = {{milliseconds(0), first_half}, {milliseconds(40), second_half}, {milliseconds(200), all},
               {milliseconds(400), {"end"}}};
  std::vector<int> starters;
  const auto logs = run_ranks(2, script, "end", &starters);
  // Every cycle released the same names in the same order on both ranks.
  REQUIRE(logs[0].released == logs[1].released);
  std::vector<std::string> order;
  int cycles_with_releases = 0;
  for (const auto& cycle : logs[0].released) {
    order.insert(order.end(), cycle.begin(), cycle.end());
    if (!cycle.empty()) ++cycles_with_releases;
  }
  // Each name twice (two steps) plus "end"; each half released in its own cycle.
  REQUIRE(order.size() == 21);
  CHECK(cycles_with_releases == 5);
  for (const auto& name : all) CHECK(std::count(order.begin(), order.end(), name) == 2);
  std::vector<std::string> step1(order.begin(), order.begin() + 10);
  std::sort(step1.begin(), step1.end());
  CHECK(step1 == all);  // step 1 complete before any step-2 release
}

TEST_CASE("the settle gap follows the intervals inside bursts", "[cycle_start][settle]") {
  const auto hold = std::chrono::microseconds(1000);
  SettleWindow window(hold);
  auto t = Clock::now();
  // Lone synchronous submissions (nothing else in flight): no gap, a cycle is due at once.
  for (int i = 0; i < 20; ++i) {
    t += std::chrono::microseconds(300);
    window.on_arrival(t, /*burst=*/false);
    CHECK(window.due() == t);
    window.on_cycle_start();
  }
  CHECK(window.gap() == Clock::duration::zero());
  // A burst with 10 us between submissions: the gap grows toward eight times that.
  for (int i = 0; i < 200; ++i) {
    t += std::chrono::microseconds(10);
    window.on_arrival(t, true);
  }
  CHECK(window.gap() > std::chrono::microseconds(75));
  CHECK(window.gap() < std::chrono::microseconds(85));
  window.on_cycle_start();
  t += std::chrono::microseconds(10);
  window.on_arrival(t, true);
  CHECK(window.due() == t + window.gap());  // a cycle once quiet for the gap
  window.on_cycle_start();
  // A burst that keeps streaming is held at most the longest hold after its first submission.
  const auto first = t + std::chrono::microseconds(10);
  for (int i = 1; i <= 150; ++i) window.on_arrival(first + std::chrono::microseconds(10 * (i - 1)), true);
  CHECK(window.due() == first + hold);  // not the last arrival plus the gap (later)
  window.on_cycle_start();
  // Intervals longer than the hold are not bursts: they leave the gap alone.
  const auto before = window.gap();
  t = first + std::chrono::milliseconds(50);
  window.on_arrival(t, true);
  CHECK(window.gap() == before);
}

TEST_CASE("a rank whose submissions are usually missing elsewhere holds its starts for the cycle time", "[cycle_start][settle]") {
  const auto hold = std::chrono::microseconds(1000);
  SettleWindow window(hold);
  auto t = Clock::now();
  window.on_arrival(t, false);
  CHECK(window.due() == t);  // not leading: a lone submission starts a cycle at once
  window.on_cycle_start();
  // Its cycles keep finding its fresh submissions not yet submitted by the others (a broadcast
  // root, a rank with less to compute): starting early only adds cycles that release nothing.
  for (int i = 0; i < 20; ++i) window.record_start(true);
  REQUIRE(window.leading());
  t += std::chrono::milliseconds(5);
  window.on_arrival(t, false);
  CHECK(window.due() == t + hold);
  window.on_cycle_start();
  // Once its submissions are ready everywhere when its cycles start, it starts at once again.
  for (int i = 0; i < 12; ++i) window.record_start(false);
  CHECK_FALSE(window.leading());
  t += std::chrono::milliseconds(5);
  window.on_arrival(t, false);
  CHECK(window.due() == t);
  // Ahead in 3 of 4 cycles is what chance gives each of 4 ranks: not leading at np=4, but
  // leading at np=2, where chance gives 1 in 2.
  window.set_ranks(4);
  for (int i = 0; i < 400; ++i) window.record_start(i % 4 != 0);
  CHECK_FALSE(window.leading());
  window.set_ranks(2);
  CHECK(window.leading());
}

TEST_CASE("a batch is held while it is submitted and due as soon as it ends", "[cycle_start][settle]") {
  const auto hold = std::chrono::microseconds(1000);
  SettleWindow window(hold);
  auto t = Clock::now();
  // Outside a batch a lone submission is due at once (no burst seen yet).
  window.on_arrival(t, false);
  CHECK(window.due() == t);
  window.on_cycle_start();
  // Inside one, submissions wait for its end, at most the longest hold.
  window.set_batches_open(1);
  t += std::chrono::milliseconds(5);
  const auto first = t;
  for (int i = 0; i < 3; ++i) {
    window.on_arrival(t, false);
    t += std::chrono::microseconds(2);
  }
  CHECK(window.due() == first + hold);
  // Its end makes them due then, with no gap to wait out.
  window.set_batches_open(0);
  window.on_announce(t);
  CHECK(window.due() == t);
  window.on_cycle_start();
  // The announcement does not outlive the cycle that took the batch.
  window.on_arrival(t + std::chrono::microseconds(500), false);
  CHECK(window.due() == t + std::chrono::microseconds(500) + window.gap());
  window.on_cycle_start();
  // A leading rank still holds a batch for the longest hold: the others start the cycle.
  for (int i = 0; i < 20; ++i) window.record_start(true);
  REQUIRE(window.leading());
  t += std::chrono::milliseconds(5);
  window.on_arrival(t, false);
  window.on_announce(t + std::chrono::microseconds(3));
  CHECK(window.due() == t + hold);
}
