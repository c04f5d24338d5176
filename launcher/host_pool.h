// The elastic driver's view of where ranks may run: the hosts discovery offers, less the slots
// of ranks that failed there (each failure takes one slot of its host out for a cooldown that
// doubles with the host's failures, from MIN up to MAX of --blacklist-cooldown-range; without
// that flag, for good). Slots that discovery stopped offering on a host since a failure there
// are taken as the failed ones (a health check that drops a dead GPU), not as more lost slots.
// Pure bookkeeping with the time passed in, so tests drive it directly. Main thread only.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hosts.h"

namespace hvd::launcher {

class HostPool {
 public:
  using Clock = std::chrono::steady_clock;
  struct Cooldown {
    int min_seconds = 0;
    int max_seconds = 0;
  };

  explicit HostPool(std::optional<Cooldown> cooldown) : cooldown_(cooldown) {}

  void set_discovered(std::vector<HostSlots> hosts) { discovered_ = std::move(hosts); }
  const std::vector<HostSlots>& discovered() const { return discovered_; }

  // One slot of `host`, where the failed launch ran `running` ranks, is bad from `now`; returns
  // the cooldown in seconds (0: for good).
  int mark_failed(const std::string& host, int running, Clock::time_point now);

  // Discovered hosts with their usable slots at `now` (hosts with none left out), in order.
  std::vector<HostSlots> usable(Clock::time_point now) const;
  // The first hosts of usable() holding `np` slots (the last one possibly partly used).
  std::vector<HostSlots> assign(int np, Clock::time_point now) const;
  // Hosts with a bad slot at `now`, for messages and srun --exclude.
  std::vector<std::string> blacklisted(Clock::time_point now) const;
  // "host (1 slot until 12 s from now)", for messages; empty when nothing is blacklisted.
  std::string blacklist_summary(Clock::time_point now) const;

 private:
  struct BadSlot {
    std::string host;
    std::optional<Clock::time_point> until;  // none: for good
    int known_slots = 0;  // the host's slots when it failed: those running, or offered if more
    bool active(Clock::time_point now) const;  // still left out at `now`
  };

  std::optional<Cooldown> cooldown_;
  std::vector<HostSlots> discovered_;
  std::vector<BadSlot> bad_;
  std::map<std::string, int> failures_;
};

// The host that runs `rank` when ranks fill `hosts` in order (mpirun -map-by slot); empty if
// out of range.
std::string host_of_rank(const std::vector<HostSlots>& hosts, int rank);

}  // namespace hvd::launcher
