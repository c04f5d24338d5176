// The process sets this process knows (Horovod's process sets): the global set (id 0) and every
// set registered at init or by add_process_set, each with its Communicator and Controller on the
// ranks that belong to it. User threads look sets up (under the table's lock) to enqueue; only
// the background thread adds, removes and negotiates. Owned by the Runtime.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "core/controller.h"
#include "core/world.h"

namespace hvd::detail {

// Reserved names of the global-set requests behind add_process_set / remove_process_set: BARRIER
// requests whose shape carries the new set's ranks (or the removed set's id), so ranks that pass
// different values get a mismatch error like any other collective.
constexpr const char* kAddProcessSetPrefix = "__hvd_add_process_set";
constexpr const char* kRemoveProcessSetPrefix = "__hvd_remove_process_set";

struct ProcessSetState {
  int id = 0;
  std::vector<int> ranks;                  // global ranks, ascending
  std::unique_ptr<Communicator> owned;     // a set's own group (members only; the world's is the World's)
  Communicator* communicator = nullptr;    // null on ranks outside the set
  std::unique_ptr<Controller> controller;  // members only
  bool joined = false;                     // background thread: this rank's join() in this set is pending
  bool member() const { return communicator != nullptr; }
};

// A set's controller, made the same way for every set (the Runtime's settings and timeline).
using ControllerFactory = std::function<std::unique_ptr<Controller>(const ProcessSetState& set)>;

// "process set 2 (ranks [0, 1])"; "the global process set" for id 0.
std::string describe_process_set(int id, const std::vector<int>& ranks);

class ProcessSetTable {
 public:
  // Ranks for a new set: sorted, or an error naming what is wrong (empty, out of [0, world_size),
  // repeated, or the same ranks as a registered set).
  std::string check_new_ranks(const std::vector<int>& ranks, int world_size, std::vector<int>* sorted) const;

  std::mutex& mutex() { return mutex_; }  // held by enqueue and by add/remove
  // Under mutex(): the set, or null when the id was never registered or was removed.
  ProcessSetState* find(int id);
  // Ids are handed out in order and never reused, so a removed set needs no record: an id below
  // the next one that no set holds was removed. (A record per removal grew without bound over
  // add/remove cycles.)
  bool was_removed(int id) const { return id >= 0 && id < next_id_ && sets_.count(id) == 0; }
  // Under mutex(); background thread. Ids are assigned in call order, the same on every rank.
  ProcessSetState& add(std::vector<int> sorted_ranks);
  // add(), then the set's group, created collectively over every rank of `world` (each calls
  // this at the same point), and on its members its controller. Under mutex(); background thread.
  ProcessSetState& open(std::vector<int> sorted_ranks, World& world, const ControllerFactory& make_controller);
  void remove(int id);
  // Background thread: the sets this rank belongs to, ascending id (the global set first).
  std::vector<ProcessSetState*> member_sets();
  // Background thread: the set this rank belongs to with the lowest id above `id` (the global
  // set for -1), or null. Looked up anew each time, so sets added or removed meanwhile count.
  ProcessSetState* next_member_set(int id);
  // Background thread: some registered set leaves this rank out (its members' collectives run
  // in global cycles this rank must join without submitting anything).
  bool some_set_excludes_this_rank();
  // Destroys every set's communicator and controller (before the world is finalized).
  void clear();

 private:
  mutable std::mutex mutex_;
  std::map<int, std::unique_ptr<ProcessSetState>> sets_;
  int next_id_ = 0;
};

}  // namespace hvd::detail
