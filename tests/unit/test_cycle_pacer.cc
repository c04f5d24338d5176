// The cycle-start policy (CyclePacer) on simulated time over the fake channel: how often a
// waiting rank looks for another rank's start (by what it expects, and for how long it has
// expected it), when it asks, and how it waits for the coordinator's answer. Only the mpirun test
// hvd_mpi_cycle_pace_np3 saw these intervals before, by counting the background thread's sleeps.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "core/blocked_callers.h"
#include "core/cycle_pacer.h"
#include "fake_channel.h"

using hvd::detail::CycleExpectation;
using hvd::detail::CyclePacer;
using Clock = std::chrono::steady_clock;
using std::chrono::microseconds;
using std::chrono::milliseconds;

namespace {

// Simulated time: it passes only where the pacer sleeps (in the Demand's wait, or its own sleep).
struct SimulatedTime {
  Clock::time_point now = Clock::time_point(std::chrono::hours(1));
  Clock::time_point start = now;
  Clock::duration since_start() const { return now - start; }
  CyclePacer::Options options(bool oversubscribed = false) {
    CyclePacer::Options o;
    o.oversubscribed = oversubscribed;
    o.now = [this] { return now; };
    o.sleep = [this](microseconds d) { now += d; };
    return o;
  }
};

struct Look {
  Clock::duration at;  // since the wait began
  microseconds interval;
};

// A rank whose facts the test sets; every look (a wait for due work) is recorded, and simulated
// time moves to its end. Its work is due at `due_after` (never by default).
class ScriptedRank final : public CyclePacer::Demand {
 public:
  explicit ScriptedRank(SimulatedTime& time) : time_(time) {}
  bool wait_until_due(Clock::time_point deadline) override {
    looks.push_back({time_.since_start(), std::chrono::duration_cast<microseconds>(deadline - time_.now)});
    if (on_look) on_look(*this);
    // Returns when the work is due, or at the deadline.
    time_.now = std::max(time_.now, std::min(deadline, time_.start + due_after));
    return due();
  }
  bool stop_wanted() override { return stop; }
  bool busy() override { return is_busy; }
  bool awaiting_others() override { return awaiting; }
  bool holds_submissions() override { return holds; }
  bool left_out_of_a_set() override { return left_out; }
  bool due() const { return time_.since_start() >= due_after; }

  Clock::duration due_after = std::chrono::hours(1000);
  bool stop = false, is_busy = false, awaiting = false, holds = false, left_out = false;
  std::function<void(ScriptedRank&)> on_look;
  std::vector<Look> looks;

 private:
  SimulatedTime& time_;
};

// Rank 0 of a one-rank job waits until its work is due at `after`; returns its looks.
std::vector<Look> looks_until(ScriptedRank& rank, SimulatedTime& time, Clock::duration after,
                              bool oversubscribed = false) {
  auto rendezvous = std::make_shared<hvd::test::Rendezvous>(1);
  hvd::test::FakeChannel channel(rendezvous, 0);
  CyclePacer pacer(channel, nullptr, time.options(oversubscribed));
  rank.due_after = after;
  pacer.wait_for_start(rank);
  REQUIRE(rendezvous->started_cycles() == 1);  // it started the cycle once its work was due
  CHECK(time.since_start() >= after);
  return rank.looks;
}

std::size_t looks_before(const std::vector<Look>& looks, Clock::duration t) {
  std::size_t n = 0;
  for (const auto& l : looks) n += l.at < t;
  return n;
}

// The longest look that began in [from, to), in microseconds.
long long longest_between(const std::vector<Look>& looks, Clock::duration from, Clock::duration to) {
  microseconds longest{0};
  for (const auto& l : looks)
    if (l.at >= from && l.at < to) longest = std::max(longest, l.interval);
  return longest.count();
}

}  // namespace

TEST_CASE("a rank in every process set looks for others' cycles only every 8 ms", "[pacer]") {
  SimulatedTime time;
  ScriptedRank rank(time);  // nothing awaited, nothing held, in every set: OwnWorkFirst
  const auto looks = looks_until(rank, time, milliseconds(300));
  for (const auto& l : looks) CHECK(l.interval.count() == 8000);
  // The bounds hvd_mpi_cycle_pace_np3 puts on ranks 0 and 1 over 300 ms.
  CHECK(looks.size() >= 5);
  CHECK(looks.size() <= 60);
}

TEST_CASE("a rank left out of a set looks often after a cycle, then less and less", "[pacer]") {
  SimulatedTime time;
  ScriptedRank rank(time);
  rank.left_out = true;  // MayBeNeeded
  const auto looks = looks_until(rank, time, milliseconds(1500));
  REQUIRE(!looks.empty());
  CHECK(looks.front().interval.count() == 20);
  for (std::size_t i = 1; i < looks.size(); ++i) CHECK(looks[i].interval.count() >= looks[i - 1].interval.count());
  // 20 us growing to 1 ms, then at most 2 ms to 200 ms, 4 ms to 1 s, and 8 ms after.
  CHECK(longest_between(looks, {}, milliseconds(20)) == 1000);
  CHECK(longest_between(looks, milliseconds(20), milliseconds(200)) == 2000);
  CHECK(longest_between(looks, milliseconds(200), milliseconds(1000)) == 4000);
  CHECK(longest_between(looks, milliseconds(1000), milliseconds(1500)) == 8000);
  // The bound hvd_mpi_cycle_pace_np3 puts on a rank outside the set over 300 ms (~140 there).
  CHECK(looks_before(looks, milliseconds(300)) >= 80);
  CHECK(looks_before(looks, milliseconds(300)) <= 200);
}

TEST_CASE("a rank ahead of the others looks every 100 us for 200 ms, unless ranks outnumber cores", "[pacer]") {
  for (const bool oversubscribed : {false, true}) {
    INFO("oversubscribed " << oversubscribed);
    SimulatedTime time;
    ScriptedRank rank(time);
    rank.awaiting = true;  // PeersDue
    const auto looks = looks_until(rank, time, milliseconds(400), oversubscribed);
    if (!oversubscribed) {
      CHECK(longest_between(looks, {}, milliseconds(200)) == 100);
      CHECK(looks_before(looks, milliseconds(200)) >= 1900);
      CHECK(longest_between(looks, milliseconds(200), milliseconds(400)) == 4000);
    } else {
      // Downgraded to the MayBeNeeded ramp: a look every 100 us would take a computing rank's core.
      CHECK(longest_between(looks, {}, milliseconds(20)) == 1000);
      CHECK(looks_before(looks, milliseconds(200)) < 300);
    }
  }
}

TEST_CASE("a change of expectation restarts the ramp of looks", "[pacer]") {
  SimulatedTime time;
  ScriptedRank rank(time);
  rank.left_out = true;
  // Half a second into the wait, this rank's submissions start waiting on the others'.
  rank.on_look = [&](ScriptedRank& r) {
    if (time.since_start() >= milliseconds(500)) r.awaiting = true;
  };
  const auto looks = looks_until(rank, time, milliseconds(600));
  std::size_t first_due = 0;
  while (looks[first_due].at < milliseconds(500)) ++first_due;
  CHECK(looks[first_due].interval.count() == 4000);  // asked before the change counted
  REQUIRE(first_due + 1 < looks.size());
  CHECK(looks[first_due + 1].interval.count() == 20);  // PeersDue from its start
  CHECK(longest_between(looks, looks[first_due + 1].at, milliseconds(600)) == 100);
}

TEST_CASE("what a waiting rank expects", "[pacer]") {
  SimulatedTime time;
  ScriptedRank rank(time);
  CHECK(CyclePacer::expectation(rank, false) == CycleExpectation::OwnWorkFirst);
  CHECK(CyclePacer::expectation(rank, true) == CycleExpectation::OwnWorkFirst);
  rank.left_out = true;
  CHECK(CyclePacer::expectation(rank, true) == CycleExpectation::MayBeNeeded);
  rank.holds = true;  // a burst settling: worth looking often only while a caller waits for it
  CHECK(CyclePacer::expectation(rank, false) == CycleExpectation::MayBeNeeded);
  CHECK(CyclePacer::expectation(rank, true) == CycleExpectation::PeersDue);
  rank.left_out = rank.holds = false;
  rank.awaiting = true;
  CHECK(CyclePacer::expectation(rank, false) == CycleExpectation::PeersDue);
}

TEST_CASE("a busy rank starts a cycle every 100 ms without news, an idle one does not", "[pacer]") {
  for (const bool busy : {true, false}) {
    INFO("busy " << busy);
    SimulatedTime time;
    ScriptedRank rank(time);
    rank.is_busy = busy;
    auto rendezvous = std::make_shared<hvd::test::Rendezvous>(1);
    hvd::test::FakeChannel channel(rendezvous, 0);
    CyclePacer pacer(channel, nullptr, time.options());
    rank.due_after = milliseconds(250);  // the idle rank's next submission
    pacer.wait_for_start(rank);
    const auto first = time.since_start();
    pacer.wait_for_start(rank);
    const auto second = time.since_start();
    INFO("first " << first.count() << " ns, second " << second.count() << " ns");
    if (busy) {
      // The heartbeat is measured from the previous start (the first one: at once, as no cycle
      // ran before), and the look before it is cut short to meet it.
      CHECK(first == Clock::duration::zero());
      CHECK(second == CyclePacer::kBusyHeartbeat);
    } else {
      CHECK(first == milliseconds(250));   // its submission
      CHECK(second == milliseconds(250));  // still due: at once
    }
  }
}

TEST_CASE("a rank that must stop asks at once, and the watchdog watches from then", "[pacer]") {
  SimulatedTime time;
  ScriptedRank rank(time);
  rank.stop = true;
  auto rendezvous = std::make_shared<hvd::test::Rendezvous>(2);
  hvd::test::FakeChannel channel(rendezvous, 1);
  hvd::detail::Progress progress;
  CyclePacer pacer(channel, &progress, time.options());
  std::uint64_t watched_cycle = 0;
  std::thread coordinator([&] {
    while (rendezvous->asks() == 0) std::this_thread::sleep_for(microseconds(100));
    watched_cycle = progress.cycle();
    rendezvous->announce(0);
  });
  pacer.wait_for_start(rank);
  coordinator.join();
  CHECK(watched_cycle == 1);  // entered before asking: the wait for the start is watched
  CHECK(rank.looks.empty());  // no wait for local work
  CHECK(rendezvous->starters() == std::vector<int>{1});
}

TEST_CASE("the coordinator starts a cycle another rank asked for", "[pacer]") {
  SimulatedTime time;
  ScriptedRank rank(time);  // rank 0 with nothing of its own: OwnWorkFirst
  auto rendezvous = std::make_shared<hvd::test::Rendezvous>(2);
  hvd::test::FakeChannel channel(rendezvous, 0);
  CyclePacer pacer(channel, nullptr, time.options());
  rank.due_after = milliseconds(1000);  // its own work, much later
  rank.on_look = [&](ScriptedRank& r) {
    if (r.looks.size() == 3) rendezvous->ask(0, 1);
  };
  pacer.wait_for_start(rank);
  CHECK(rank.looks.size() == 3);  // answered after the look that the request arrived in
  CHECK(rendezvous->starters() == std::vector<int>{1});
  CHECK(rendezvous->started_cycles() == 1);
}

TEST_CASE("a rank waits for the coordinator's answer by polling only while a caller is blocked", "[pacer]") {
  enum class Case { NoCallerBlocked, CallerBlocked, CallerBlockedOversubscribed };
  for (const Case c : {Case::NoCallerBlocked, Case::CallerBlocked, Case::CallerBlockedOversubscribed}) {
    INFO("case " << static_cast<int>(c));
    SimulatedTime time;
    ScriptedRank rank(time);
    rank.due_after = Clock::duration::zero();
    auto rendezvous = std::make_shared<hvd::test::Rendezvous>(2);
    hvd::test::FakeChannel channel(rendezvous, 1);
    std::vector<microseconds> sleeps;
    Clock::duration asked_at{};
    CyclePacer::Options options = time.options(c == Case::CallerBlockedOversubscribed);
    // Each look at the clock moves it 1 us, so polling takes simulated time; the coordinator
    // answers on the sixth sleep.
    options.now = [&] { return time.now += microseconds(1); };
    options.sleep = [&](microseconds d) {
      if (sleeps.empty()) asked_at = time.since_start();
      sleeps.push_back(d);
      time.now += d;
      if (sleeps.size() == 6) rendezvous->announce(0);
    };
    CyclePacer pacer(channel, nullptr, options);
    std::unique_ptr<hvd::detail::BlockedCallers::Scope> blocked;
    if (c != Case::NoCallerBlocked) blocked = std::make_unique<hvd::detail::BlockedCallers::Scope>();
    // The coordinator answers once asked; when the rank polls, its sixth sleep brings the answer
    // instead (a rank that waits otherwise gets it here after 2 s, and the checks below fail).
    std::thread coordinator([&] {
      while (rendezvous->asks() == 0) std::this_thread::sleep_for(microseconds(100));
      const auto until = Clock::now() + (c == Case::CallerBlocked ? std::chrono::seconds(2) : Clock::duration::zero());
      while (rendezvous->started_cycles() == 0 && Clock::now() < until) std::this_thread::sleep_for(microseconds(100));
      if (rendezvous->started_cycles() == 0) rendezvous->announce(0);
    });
    pacer.wait_for_start(rank);
    coordinator.join();
    CHECK(rendezvous->asks() == 1);
    if (c == Case::CallerBlocked) {
      CHECK(channel.awaited_starts() == 0);
      REQUIRE(sleeps.size() == 6);
      // Polled for kPollWhileBlocked first, then looked at the PeersDue interval.
      const auto polled_us = std::chrono::duration_cast<microseconds>(asked_at).count();
      CHECK(polled_us >= microseconds(hvd::detail::kPollWhileBlocked).count());
      CHECK(polled_us < microseconds(hvd::detail::kPollWhileBlocked).count() + 50);
      CHECK(sleeps.front().count() == 20);
      for (auto d : sleeps) CHECK(d.count() <= 100);
    } else {
      CHECK(channel.awaited_starts() == 1);  // the channel's own sleeping wait
      CHECK(sleeps.empty());
    }
  }
}
