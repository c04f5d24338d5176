#include "core/watchdog.h"

#include <pthread.h>

#include <algorithm>
#include <cmath>

#include "core/logging.h"
#include "core/process_set_table.h"

namespace hvd::detail {
namespace {

using Clock = std::chrono::steady_clock;

double shortest_positive(double a, double b) {
  if (a <= 0) return b;
  if (b <= 0) return a;
  return std::min(a, b);
}

// How often the thread wakes while it holds a failure: the members' notices go out and come in
// well within the grace.
constexpr std::chrono::milliseconds kHeldFailureTick{50};

std::string whole_seconds(double s) { return std::to_string(static_cast<long long>(std::floor(s))); }

}  // namespace

WatchdogOptions::WatchdogOptions(const Settings& settings)
    : warning_seconds(settings.stall_check_disabled ? 0.0 : settings.stall_check_seconds) {
  const double stall = settings.stall_shutdown_seconds, liveness = settings.liveness_timeout_seconds;
  if (stall > 0 && (liveness <= 0 || stall <= liveness)) {
    fatal_seconds = stall;
    fatal_setting = "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS";
  } else {
    fatal_seconds = liveness;
    fatal_setting = "HOROVOD_LIVENESS_TIMEOUT_SECONDS";
  }
}

Watchdog::Watchdog(WatchdogOptions options, int rank, int size, LivenessChannel& channel, const Progress& progress,
                   FatalHandler on_fatal, NoticeHandler on_peer_abort)
    : options_(std::move(options)),
      rank_(rank),
      size_(size),
      channel_(channel),
      progress_(progress),
      on_fatal_(std::move(on_fatal)),
      on_peer_abort_(std::move(on_peer_abort)),
      last_heard_(size) {
  const double shortest = shortest_positive(options_.warning_seconds, options_.fatal_seconds);
  const double tick_s = shortest > 0 ? std::clamp(shortest / 8, 0.05, 1.0) : 1.0;
  tick_ = std::chrono::milliseconds(static_cast<long long>(tick_s * 1000));
  // Report only once a cycle has lasted a quarter of the shortest timeout: ordinary cycles
  // (even long collectives) send nothing.
  const double report_s = std::max(tick_s, shortest > 0 ? shortest / 4 : 1.0);
  report_after_ = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(report_s));
}

Watchdog::~Watchdog() { stop(); }

void Watchdog::start() {
  if (options_.warning_seconds <= 0 && options_.fatal_seconds <= 0) return;
  thread_ = std::thread([this] { main(); });
}

void Watchdog::stop() {
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    first = !stopping_;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Once, while the world still exists (the Runtime stops the watchdog before the backends).
  if (first) hand_on_abort_notices();
}

void Watchdog::hand_on_abort_notices() {
  for (const auto& notice : channel_.receive_abort_notices())
    if (on_peer_abort_) on_peer_abort_(notice);
}

int Watchdog::stop(const std::string& reason) {
  stop();
  // The thread has ended: the channel is this caller's now. A peer's watchdog reads the report at
  // its next tick (the peers' settings, so their ticks, are this rank's).
  return tell_every_rank(reason, 3 * tick_ + std::chrono::seconds(1));
}

int Watchdog::tell_every_rank(const std::string& reason, std::chrono::milliseconds patience) {
  return channel_.send_failure("rank " + std::to_string(rank_) + " stopped: " + reason, patience);
}

void Watchdog::main() {
  pthread_setname_np(pthread_self(), "hvd-watchdog");
  std::unique_lock<std::mutex> lock(mutex_);
  while (!cv_.wait_for(lock, progress_.holds_failure() ? std::min(tick_, kHeldFailureTick) : tick_,
                       [this] { return stopping_; })) {
    lock.unlock();
    bool fired = false;
    try {
      fired = check(Clock::now());
    } catch (const std::exception& e) {
      log_warn(std::string("liveness watchdog stopped: ") + e.what());
      fired = true;
    }
    lock.lock();
    if (fired) return;
  }
}

std::vector<int> Watchdog::silent_ranks(const std::vector<Clock::time_point>& last_heard, int self,
                                        Clock::time_point now, Clock::duration fresh) {
  std::vector<int> silent, all;
  for (int r = 0; r < static_cast<int>(last_heard.size()); ++r) {
    if (r == self) continue;
    all.push_back(r);
    if (last_heard[r] == Clock::time_point{} || now - last_heard[r] > fresh) silent.push_back(r);
  }
  return silent.empty() ? all : silent;
}

std::string Watchdog::describe_ranks(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size() && i < 16; ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > 16) out += ", ... (" + std::to_string(ranks.size()) + " ranks)";
  return out;
}

// See Note [A failed process set stops every rank] (cycle.h). A member that saw its set's round
// fail says so to the set's other members; one that did not may wait inside the set's
// collective, where no global round reaches it.
bool Watchdog::check_held_failure(Clock::time_point now) {
  for (const auto& [rank, set_id] : channel_.receive_set_failures_seen()) seen_by_[set_id].insert(rank);
  const auto held = progress_.held_failures();
  if (!held) return false;
  for (const auto& set : held->sets)
    if (told_members_.insert(set.id).second) channel_.send_set_failure_seen(set.id, set.ranks);
  for (const auto& set : held->sets) {
    if (now - set.since < options_.held_failure_grace) continue;
    std::vector<int> silent;
    for (int r : set.ranks)
      if (r != rank_ && seen_by_[set.id].count(r) == 0) silent.push_back(r);
    if (silent.empty()) continue;  // every member saw it: the global round will come
    tell_every_rank(held->reason, std::chrono::milliseconds(0));
    on_fatal_(held->reason + "; " + describe_ranks(silent) + " of " + describe_process_set(set.id, set.ranks) +
              " did not report seeing it (and may wait inside the set's collective), and no global round "
              "followed, so this rank told every rank and ends its collectives");
    return true;
  }
  return false;
}

bool Watchdog::check(Clock::time_point now) {
  if (const auto failure = channel_.receive_failure()) {
    on_fatal_(failure->reason + "; ending this rank's collectives");
    // The failed rank aborts its side of the backends' collectives: this rank's side must end
    // too, or its device work waits for that rank for good (and with it every later
    // device-synchronizing call, such as cudaFree).
    if (on_peer_abort_) on_peer_abort_(failure->reason);
    // Only now: the failed rank may then end the collectives this rank waits in (Watchdog::stop),
    // and this rank's operations already carry the reason.
    channel_.send_failure_seen(failure->from);
    return true;
  }
  if (check_held_failure(now)) return true;
  hand_on_abort_notices();
  bool asked = false;
  for (int r : channel_.receive_reports())
    if (r >= 0 && r < size_) {
      last_heard_[r] = now;
      asked = true;
    }
  const auto stuck = progress_.in_cycle_for(now);
  // A rank between cycles or idle is running and not behind anyone: it answers, so that a
  // waiting peer does not count it among the ranks that stopped.
  if (asked && stuck == Clock::duration::zero()) channel_.send_waiting();
  if (stuck < report_after_ || size_ < 2) return false;
  channel_.send_waiting();
  const double seconds = std::chrono::duration<double>(stuck).count();
  const std::uint64_t cycle = progress_.cycle();
  const bool fatal = options_.fatal_seconds > 0 && seconds >= options_.fatal_seconds;
  const bool warn = options_.warning_seconds > 0 && seconds >= options_.warning_seconds && warned_cycle_ != cycle;
  if (!fatal && !warn) return false;

  const auto fresh = 3 * tick_ + std::chrono::milliseconds(200);
  const std::vector<int> silent = silent_ranks(last_heard_, rank_, now, fresh);
  const bool all_waiting = std::all_of(silent.begin(), silent.end(), [&](int r) {
    return last_heard_[r] != Clock::time_point{} && now - last_heard_[r] <= fresh;
  });
  std::string what = "rank " + std::to_string(rank_) + " has waited " + whole_seconds(seconds) +
                     " s in background cycle " + std::to_string(cycle) + " (negotiation and collectives need every rank) for " +
                     describe_ranks(silent) +
                     (all_waiting ? ", which wait too: the ranks are stuck in different collectives"
                                  : ", which stopped responding (stopped, frozen, dead, or blocked outside horovodcpp)");
  if (fatal) {
    on_fatal_("liveness timeout (" + options_.fatal_setting + "=" + whole_seconds(options_.fatal_seconds) +
              "): " + what + "; ending this rank's collectives");
    return true;
  }
  warned_cycle_ = cycle;
  log_warn("liveness: " + what + "; the job ends after " +
           (options_.fatal_seconds > 0 ? options_.fatal_setting + "=" + whole_seconds(options_.fatal_seconds) + " s"
                                       : std::string("no limit (HOROVOD_LIVENESS_TIMEOUT_SECONDS=0)")));
  return false;
}

}  // namespace hvd::detail
