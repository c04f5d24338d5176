// Rank 0's side of the negotiation: the table of requests that arrived from every rank, the
// consistency checks, readiness (joined ranks count as ready; a group waits for all its
// members), and the stall inspector. Requests and messages carry global ranks. It answers each
// gathered batch of request lists with the responses of the names that became ready, in the
// order they did. Used only on rank 0's background thread, through its Controller (controller.h
// describes the whole cycle).
//
// Note [The coordinator's work is linear in ranks x tensors]
// Every cache miss (the first step, a new name, allgathers whose shapes change every step) runs
// through here with one request per rank and tensor, so nothing may cost more than constant
// time per request, and little of it. Each name keeps the first request that arrived in full and
// counts the others (a bitmap by rank in the group catches a rank that reports twice; a count
// says when all have, as Horovod counts), keeping only what may differ between ranks: the
// device index and, for collectives with a per-rank first dimension, that dimension. A request
// that differs in anything else is kept whole, so the checks of a ready name see the lowest
// rank of the agreeing ranks and every request that differs, and name the same ranks and values
// as a check of every request would. The request lists are read into one reused Request (no
// allocation per request), and a group's size check is kept up to date as its members arrive.
// Memory matters as much as work here: at 4096 ranks one cycle's lists are megabytes, which
// come from memory, not cache. So requests are encoded compactly (codec.cc: about 20 bytes for
// a gradient), and a batch without joins is read one list at a time as the channel receives it
// (start_batch, read_list, finish_batch; ControlChannel::gather_each), so rank 0 never holds
// every rank's list at once and reads each while it is still in cache.
// docs/benchmarks.md ("Controller") shows the cost from 2 to 4096 simulated ranks.
#pragma once

#include <chrono>
#include <cstdint>
#include <list>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/codec.h"
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
  // time sets the result's shutdown_reason. `joins_possible` false promises that no list holds a
  // join (no rank has one in flight): the lists are then read once instead of twice.
  ResponseList coordinate(const std::vector<std::vector<std::uint8_t>>& gathered, bool joins_possible = true);
  // The same batch read as the lists arrive, for a batch without joins (coordinate's
  // joins_possible false): start_batch, read_list for every rank in rank order (each list is
  // read during the call only, so the channel need not hold them all), then finish_batch.
  // A corrupt or missing list sets the result's shutdown_reason, as coordinate does.
  void start_batch(bool joins_read = false);
  void read_list(int member, const std::uint8_t* data, std::size_t size);
  ResponseList finish_batch();
  bool has_pending() const { return !table_.empty(); }
  // A stall inspection is due although no rank has anything new (forces a slow-path cycle).
  bool stall_check_due() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct TableEntry {
    Request first;                   // the first request that arrived; the others compare to it
    std::vector<Request> different;  // requests that differ from it beyond the per-rank fields
    std::vector<int> different_members;   // their ranks in the group
    std::vector<bool> reported;           // by rank in the group
    std::vector<std::int32_t> devices;    // by rank in the group, once two devices differ
    std::vector<std::int64_t> first_dims;  // by rank in the group, for a per-rank first dimension
    int reporters = 0;
    int joined_reporters = 0;  // reporters that have joined since (counted once)
    Clock::time_point first_seen;
    std::list<std::string>::iterator order;  // its place in arrival_order_
    bool listed_ready = false;               // in this batch's became_ready already
    bool waiting_for_group = false;          // ready, held until its whole group is
  };
  // What the requests naming one group say about its size, updated as they arrive.
  struct GroupState {
    int requests = 0;  // in the table
    std::int32_t first_rank = 0, first_size = 0;
    std::string size_error;  // the first disagreement; empty while the ranks agree
  };

  // The batch being read: what read_list found so far.
  struct Batch {
    Clock::time_point now;
    bool joins_read = false;  // coordinate() applied this batch's joins before reading it
    int next_member = 0;
    std::string error;  // the first corrupt list; the rest of the batch is skipped
    std::vector<std::string> became_ready;
  };

  std::string find_joins(const std::vector<std::vector<std::uint8_t>>& gathered, std::vector<int>* joins);
  std::string corrupt_list(int member, const CodecError& e) const;
  std::string wrong_list_count(std::size_t received) const;
  std::string where() const;  // " in process set 1 (ranks [2, 3])", or empty for the world
  std::string with_set(std::string error) const;  // a response's error, naming the set (if any)
  void accept(const Request& request, int member, std::size_t position, Clock::time_point now,
              std::vector<std::string>* became_ready);
  void join(int member);
  bool is_ready(const TableEntry& entry) const;
  std::vector<Request> requests_to_check(const TableEntry& entry) const;
  Response build_response(const std::string& name, const TableEntry& entry) const;
  void release(const std::string& name, std::vector<Response>* out);
  void note_group(const Request& request);
  void emit(const std::string& name, Response response, std::vector<Response>* out);
  std::string inspect_stalls();

  int global_rank(int rank_in_group) const;

  int size_;
  Timeline* timeline_;
  CoordinatorGroup group_;
  StallInspector stall_inspector_;
  std::unordered_map<std::string, TableEntry> table_;
  std::list<std::string> arrival_order_;  // names in the order their first request arrived
  std::map<std::string, std::vector<std::string>> ready_groups_;  // group -> ready members
  std::unordered_map<std::string, GroupState> groups_;            // group -> its requests' sizes
  std::set<int> joined_ranks_;      // global ranks, for messages
  std::vector<bool> joined_;        // by rank in the group
  int last_joined_rank_ = -1;
  Batch batch_;
  Request scratch_;                 // each request read, in turn (its buffers are reused)
  std::vector<TableEntry*> hints_;  // this batch: the entry of the last request at each list position
  Clock::time_point last_stall_check_ = Clock::now();
};

}  // namespace hvd::detail
