// Rank 0's side of the negotiation: the table of requests that arrived from every rank, the
// consistency checks, readiness (joined ranks count as ready; a group waits for all its
// members), and the stall inspector. Requests and messages carry global ranks. It answers each gathered batch of request lists with the
// responses of the names that became ready, in the order they did. Used only on rank 0's
// background thread, through its Controller (controller.h describes the whole cycle).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/message.h"
#include "core/stall_inspector.h"

namespace hvd {
class Timeline;
}

namespace hvd::detail {

// Who the coordinator negotiates for, as messages name it: a process set's coordinator names
// global ranks and the set. Empty: the world (ranks are their own global ranks).
struct CoordinatorGroup {
  std::vector<int> global_ranks;  // index: rank in the set
  std::string label;              // "process set 1 (ranks [2, 3])"
};

class Coordinator {
 public:
  Coordinator(int size, StallOptions stall, Timeline* timeline, CoordinatorGroup group = {});

  // gathered[r] is rank r's encoded RequestList. A corrupt list or a stall past the shutdown
  // time sets the result's shutdown_reason.
  ResponseList coordinate(const std::vector<std::vector<std::uint8_t>>& gathered);
  bool has_pending() const { return !table_.empty(); }
  // A stall inspection is due although no rank has anything new (forces a slow-path cycle).
  bool stall_check_due() const;
  const std::string& stall_error() const { return stall_error_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct TableEntry {
    std::vector<Request> requests;  // one per submitting rank, in arrival order
    Clock::time_point first_seen;
  };

  void accept(Request request, std::vector<std::string>* became_ready);
  bool is_ready(const TableEntry& entry) const;
  Response build_response(const std::string& name, const TableEntry& entry) const;
  void release(const std::string& name, std::vector<Response>* out);
  std::string check_group_sizes(const std::string& group) const;  // empty when the ranks agree
  void emit(const std::string& name, Response response, std::vector<Response>* out);
  std::string inspect_stalls();

  int global_rank(int rank_in_group) const;
  int rank_in_group(int global) const;

  int size_;
  Timeline* timeline_;
  CoordinatorGroup group_;
  StallInspector stall_inspector_;
  std::map<std::string, TableEntry> table_;
  std::vector<std::string> arrival_order_;  // names in the order their first request arrived
  std::map<std::string, std::vector<std::string>> ready_groups_;  // group -> ready members
  std::set<int> joined_ranks_;
  int last_joined_rank_ = -1;
  Clock::time_point last_stall_check_ = Clock::now();
  std::string stall_error_;
};

}  // namespace hvd::detail
