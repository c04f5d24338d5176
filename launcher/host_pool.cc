#include "host_pool.h"

#include <algorithm>

namespace hvd::launcher {

int HostPool::mark_failed(const std::string& host, int running, Clock::time_point now) {
  const int failures = ++failures_[host];
  BadSlot bad{host, std::nullopt, running};
  for (const auto& h : discovered_)
    if (h.host == host) bad.known_slots = std::max(bad.known_slots, h.slots);
  int seconds = 0;
  if (cooldown_) {
    // MIN, 2*MIN, 4*MIN, ... up to MAX (shift capped so it cannot overflow).
    const long long grown =
        static_cast<long long>(cooldown_->min_seconds) << std::min(failures - 1, 20);
    seconds = static_cast<int>(std::min<long long>(grown, cooldown_->max_seconds));
    bad.until = now + std::chrono::seconds(seconds);
  }
  bad_.push_back(bad);
  return seconds;
}

bool HostPool::BadSlot::active(Clock::time_point now) const { return !until || now < *until; }

// Note [A slot discovery dropped after a failure is the failed one]: a rank on a host of 8
// fails and discovery then offers the host with 7 (its health check dropped the dead GPU).
// Counting the failure again would leave 6, a healthy GPU out for good; so a bad slot counts
// only beyond what discovery dropped since. If the dropped slot was a healthy one after all, the
// bad one fails again and is left out then: one relaunch more, never a slot lost for nothing.
std::vector<HostSlots> HostPool::usable(Clock::time_point now) const {
  std::vector<HostSlots> out;
  for (const auto& h : discovered_) {
    int bad = 0, known = 0;
    for (const auto& b : bad_) {
      if (b.host != h.host || !b.active(now)) continue;
      ++bad;
      known = std::max(known, b.known_slots);
    }
    const int dropped = std::max(0, known - h.slots);
    const int slots = h.slots - std::max(0, bad - dropped);
    if (slots > 0) out.push_back({h.host, slots});
  }
  return out;
}

std::vector<HostSlots> HostPool::assign(int np, Clock::time_point now) const {
  std::vector<HostSlots> out;
  for (const auto& h : usable(now)) {
    if (np <= 0) break;
    out.push_back({h.host, std::min(h.slots, np)});
    np -= out.back().slots;
  }
  return out;
}

std::vector<std::string> HostPool::blacklisted(Clock::time_point now) const {
  std::vector<std::string> out;
  for (const auto& b : bad_)
    if (b.active(now) && std::find(out.begin(), out.end(), b.host) == out.end())
      out.push_back(b.host);
  return out;
}

std::string HostPool::blacklist_summary(Clock::time_point now) const {
  std::string out;
  for (const auto& host : blacklisted(now)) {
    std::optional<Clock::time_point> latest;
    bool forever = false;
    int n = 0;
    for (const auto& b : bad_) {
      if (b.host != host || !b.active(now)) continue;
      ++n;
      if (!b.until) forever = true;
      else if (!latest || *b.until > *latest) latest = b.until;
    }
    out += (out.empty() ? "" : ", ") + host + " (" + std::to_string(n) + " slot" +
           (n == 1 ? "" : "s");
    if (forever) {
      out += " for good)";
    } else {
      const auto left = std::chrono::duration_cast<std::chrono::seconds>(*latest - now).count();
      out += " for " + std::to_string(left + 1) + " s more)";
    }
  }
  return out;
}

std::string host_of_rank(const std::vector<HostSlots>& hosts, int rank) {
  if (rank < 0) return {};
  for (const auto& h : hosts) {
    if (rank < h.slots) return h.host;
    rank -= h.slots;
  }
  return {};
}

}  // namespace hvd::launcher
