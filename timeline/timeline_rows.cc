#include "timeline/timeline_rows.h"

#include <iterator>

namespace hvd::detail {
namespace {
// Rows looked at per insertion when the table is over capacity: keeps get() O(1) even when the
// least recent rows all have spans open (they are bounded by the open spans anyway).
constexpr int kForgetAttempts = 8;
}  // namespace

void TimelineRows::reset(int first_pid) {
  rows_.clear();
  recent_.clear();
  next_pid_ = first_pid;
}

TimelineRow& TimelineRows::get(const std::string& tensor) {
  auto it = rows_.find(tensor);
  if (it != rows_.end()) {
    recent_.splice(recent_.begin(), recent_, it->second.recent);
    return it->second.row;
  }
  it = rows_.emplace(tensor, Entry{}).first;
  recent_.push_front(&it->first);  // node keys never move, so the pointer stays valid
  it->second.recent = recent_.begin();
  it->second.row.pid = next_pid_++;
  if (rows_.size() > capacity_) forget_least_recent();
  return it->second.row;
}

TimelineRow* TimelineRows::find(const std::string& tensor) {
  auto it = rows_.find(tensor);
  return it != rows_.end() ? &it->second.row : nullptr;
}

void TimelineRows::forget_least_recent() {
  // Never the most recent row: get() is about to hand it out.
  auto at = std::prev(recent_.end());
  for (int attempt = 0; attempt < kForgetAttempts && at != recent_.begin() && rows_.size() > capacity_;
       ++attempt) {
    const auto before = std::prev(at);
    auto row = rows_.find(**at);
    if (row->second.row.open.empty()) {  // a row with spans open stays
      recent_.erase(at);
      rows_.erase(row);
    }
    at = before;
  }
}

}  // namespace hvd::detail
