// The watchdog's way out for a held process set failure (Note [A failed process set stops every
// rank] in core/cycle.h): it tells the set's members that this rank saw the failure, and tells
// every rank itself only when some member did not say the same within the grace. And a peer's
// failure report (Note [An exception in the executor stops every rank] in core/executor.h):
// acknowledged only after this rank's operations failed with its reason.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/liveness_channel.h"
#include "core/progress.h"
#include "core/watchdog.h"

using namespace hvd::detail;

namespace {

// The peers' side of the liveness channel, scripted: which ranks said they saw which set fail.
class ScriptedLiveness final : public LivenessChannel {
 public:
  explicit ScriptedLiveness(std::vector<std::pair<int, int>> seen) : seen_(std::move(seen)) {}
  void send_waiting() override {}
  std::vector<int> receive_reports() override { return {}; }
  int send_failure(const std::string& reason, std::chrono::milliseconds patience) override {
    std::lock_guard<std::mutex> lock(mutex_);
    failures_sent_.push_back(reason);
    patience_.push_back(patience);
    return 0;
  }
  std::optional<FailureNotice> receive_failure() override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto notice = std::move(incoming_);
    incoming_.reset();
    return notice;
  }
  void send_failure_seen(int rank) override {
    std::lock_guard<std::mutex> lock(mutex_);
    seen_sent_.push_back(rank);
  }
  void send_abort_notice(const std::string&) override {}
  std::vector<std::string> receive_abort_notices() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::exchange(abort_notices_, {});
  }
  void deliver_abort_notice(const std::string& notice) {
    std::lock_guard<std::mutex> lock(mutex_);
    abort_notices_.push_back(notice);
  }
  void deliver_failure(FailureNotice notice) {
    std::lock_guard<std::mutex> lock(mutex_);
    incoming_ = std::move(notice);
  }
  std::vector<int> failures_seen_sent() {
    std::lock_guard<std::mutex> lock(mutex_);
    return seen_sent_;
  }
  std::vector<std::chrono::milliseconds> patience() {
    std::lock_guard<std::mutex> lock(mutex_);
    return patience_;
  }
  void send_set_failure_seen(int set_id, const std::vector<int>& ranks) override {
    std::lock_guard<std::mutex> lock(mutex_);
    told_.emplace_back(set_id, ranks);
  }
  std::vector<std::pair<int, int>> receive_set_failures_seen() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::move(seen_);  // once
  }
  std::vector<std::string> failures_sent() {
    std::lock_guard<std::mutex> lock(mutex_);
    return failures_sent_;
  }
  std::vector<std::pair<int, std::vector<int>>> told() {
    std::lock_guard<std::mutex> lock(mutex_);
    return told_;
  }

 private:
  std::mutex mutex_;
  std::vector<std::pair<int, int>> seen_;  // (rank, set id)
  std::vector<std::string> failures_sent_;
  std::vector<std::chrono::milliseconds> patience_;  // send_failure's
  std::vector<std::pair<int, std::vector<int>>> told_;
  std::optional<FailureNotice> incoming_;
  std::vector<int> seen_sent_;  // send_failure_seen's ranks
  std::vector<std::string> abort_notices_;  // delivered, not yet received
};

struct Outcome {
  std::vector<std::string> fatal;  // on_fatal's messages
  std::vector<std::string> sent;   // send_failure's
  std::vector<std::pair<int, std::vector<int>>> told;
  std::chrono::steady_clock::duration fatal_after{};  // from the hold to on_fatal
};

// Rank 0 of 3 holds `held` (set id, ranks) in that order, with a grace of 100 ms, for `watch`
// or until the watchdog fires.
Outcome watch_rank_0(const std::vector<std::pair<int, std::vector<int>>>& held, std::vector<std::pair<int, int>> seen,
                     std::chrono::milliseconds watch) {
  Progress progress;
  const auto held_at = std::chrono::steady_clock::now();
  bool first = true;
  for (const auto& [id, ranks] : held) {
    progress.hold_failure(id, ranks, first ? "first failure" : "later failure");
    first = false;
  }
  ScriptedLiveness channel(std::move(seen));
  WatchdogOptions options;
  options.held_failure_grace = std::chrono::milliseconds(100);
  std::mutex mutex;
  Outcome out;
  std::atomic<bool> fired{false};
  Watchdog watchdog(options, 0, 3, channel, progress, [&](const std::string& m) {
    std::lock_guard<std::mutex> lock(mutex);
    out.fatal.push_back(m);
    out.fatal_after = std::chrono::steady_clock::now() - held_at;
    fired = true;
  });
  watchdog.start();
  const auto until = held_at + watch;
  while (!fired.load() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  watchdog.stop();
  out.sent = channel.failures_sent();
  out.told = channel.told();
  return out;
}

}  // namespace

TEST_CASE("a held set failure that every member saw waits for the global round", "[watchdog]") {
  // Rank 2 saw set 1 fail; rank 1's notice about another set changes nothing.
  const Outcome out = watch_rank_0({{1, {0, 2}}}, {{2, 1}, {1, 4}}, std::chrono::milliseconds(600));
  CHECK(out.fatal.empty());
  CHECK(out.sent.empty());
  // This rank told the set's members once (the channel skips this rank itself).
  REQUIRE(out.told.size() == 1);
  CHECK(out.told[0].first == 1);
  CHECK(out.told[0].second == std::vector<int>{0, 2});
}

TEST_CASE("a held set failure that a member did not report reaches every rank after the grace", "[watchdog]") {
  // Set 1 was seen by its other member; set 3's rank 1 said nothing (it may wait in the set's
  // collective): the first failure's reason goes to every rank, the message names rank 1 and set 3.
  const Outcome out = watch_rank_0({{1, {0, 2}}, {3, {0, 1}}}, {{2, 1}}, std::chrono::seconds(10));
  REQUIRE(out.fatal.size() == 1);
  CHECK_THAT(out.fatal[0], Catch::StartsWith("first failure; rank 1 of process set 3 (ranks [0, 1]) did not report seeing it"));
  CHECK(out.sent == std::vector<std::string>{"rank 0 stopped: first failure"});
  CHECK(out.told.size() == 2);
  CHECK(out.fatal_after >= std::chrono::milliseconds(100));  // not before the grace
}

TEST_CASE("a peer's failure report fails this rank's operations before it is acknowledged", "[watchdog]") {
  Progress progress;
  ScriptedLiveness channel({});
  std::mutex mutex;
  std::vector<std::string> fatal;
  std::vector<std::vector<int>> seen_when_fatal;  // the acknowledgements already sent at on_fatal
  Watchdog watchdog(WatchdogOptions(), 1, 3, channel, progress, [&](const std::string& m) {
    std::lock_guard<std::mutex> lock(mutex);
    fatal.push_back(m);
    seen_when_fatal.push_back(channel.failures_seen_sent());
  });
  channel.deliver_failure({2, "rank 2 stopped: no memory"});
  watchdog.start();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (channel.failures_seen_sent().empty() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  watchdog.stop();
  REQUIRE(fatal.size() == 1);
  CHECK(fatal[0] == "rank 2 stopped: no memory; ending this rank's collectives");
  CHECK(seen_when_fatal[0].empty());  // not acknowledged before this rank acted on it
  CHECK(channel.failures_seen_sent() == std::vector<int>{2});
}

TEST_CASE("a rank that stops alone waits a few ticks at most for the peers to see its report", "[watchdog]") {
  Progress progress;
  ScriptedLiveness channel({});
  Watchdog watchdog(WatchdogOptions(), 0, 3, channel, progress, [](const std::string&) {});
  watchdog.start();
  watchdog.stop("no memory");
  CHECK(channel.failures_sent() == std::vector<std::string>{"rank 0 stopped: no memory"});
  REQUIRE(channel.patience().size() == 1);
  // Long enough for a peer's next tick, and bounded.
  CHECK(channel.patience()[0] > watchdog.tick());
  CHECK(channel.patience()[0] <= 3 * watchdog.tick() + std::chrono::seconds(1));
}

TEST_CASE("a peer's abort notice reaches the handler at the next tick, or at the stop", "[watchdog]") {
  Progress progress;
  ScriptedLiveness channel({});
  std::mutex mutex;
  std::vector<std::string> handed;
  auto handled = [&] {
    std::lock_guard<std::mutex> lock(mutex);
    return handed;
  };
  WatchdogOptions options;
  options.warning_seconds = 0.4;  // ticks of 50 ms
  Watchdog watchdog(
      options, 0, 2, channel, progress, [](const std::string&) {},
      [&](const std::string& notice) {
        std::lock_guard<std::mutex> lock(mutex);
        handed.push_back(notice);
      });
  watchdog.start();
  channel.deliver_abort_notice("rank 1 aborted its NCCL communicators: first");
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (handled().empty() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(handled() == std::vector<std::string>{"rank 1 aborted its NCCL communicators: first"});
  // One that arrives just before the stop (a peer's shutdown right after its abort) is not lost.
  channel.deliver_abort_notice("rank 1 aborted its NCCL communicators: second");
  watchdog.stop();
  CHECK(handled().size() == 2);
  watchdog.stop();  // idempotent: nothing handed on twice
  CHECK(handled().size() == 2);

  // The stop alone hands it on (a watchdog with no thread: no tick ever runs).
  ScriptedLiveness quiet_channel({});
  WatchdogOptions off;
  off.warning_seconds = 0;
  off.fatal_seconds = 0;
  std::vector<std::string> at_stop;
  Watchdog quiet(
      off, 0, 2, quiet_channel, progress, [](const std::string&) {},
      [&](const std::string& notice) { at_stop.push_back(notice); });
  quiet.start();
  quiet_channel.deliver_abort_notice("rank 1 aborted its NCCL communicators: third");
  quiet.stop();
  CHECK(at_stop == std::vector<std::string>{"rank 1 aborted its NCCL communicators: third"});
}
