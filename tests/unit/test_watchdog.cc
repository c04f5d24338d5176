// The watchdog's way out for a held process set failure (Note [A failed process set stops every
// rank] in core/cycle.h): it tells the set's members that this rank saw the failure, and tells
// every rank itself only when some member did not say the same within the grace.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
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
  void send_failure(const std::string& reason) override {
    std::lock_guard<std::mutex> lock(mutex_);
    failures_sent_.push_back(reason);
  }
  std::string receive_failure() override { return {}; }
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
  std::vector<std::pair<int, std::vector<int>>> told_;
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
