// A group of ranks as the runtime and the backends see it: this rank's index in the group, the
// group's size and the global ranks it contains, the ControlChannel its negotiation runs over,
// and one opaque data communicator per backend (an MPI_Comm, an ncclComm) for that group. The
// world, the node-local and the cross-node groups are Communicators, and so is every process
// set. Created by the World on the background thread (the only thread that uses one); owned by
// the World (its three) or by the process set.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/control_channel.h"

namespace hvd::detail {

// A backend's own handle on a group (MPI communicator, NCCL communicator). Destroyed with the
// Communicator, on the background thread, before the world is finalized.
class BackendComm {
 public:
  virtual ~BackendComm() = default;
};

class Communicator {
 public:
  // Ids: process sets use theirs (0 = the world); the node-local and cross groups have their own.
  static constexpr int kLocalId = -1;
  static constexpr int kCrossId = -2;
  static constexpr int kNodeMajorId = -3;  // World::node_major()

  Communicator(int id, std::vector<int> global_ranks, int rank, ControlChannel& control)
      : id_(id), global_ranks_(std::move(global_ranks)), rank_(rank), control_(&control) {}
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int id() const { return id_; }
  int rank() const { return rank_; }
  int size() const { return static_cast<int>(global_ranks_.size()); }
  const std::vector<int>& global_ranks() const { return global_ranks_; }
  int global_rank(int rank_in_group) const { return global_ranks_.at(rank_in_group); }
  ControlChannel& control() const { return *control_; }

  // The backend's data communicator for this group (null until the backend set one).
  BackendComm* data(const std::string& backend) const {
    auto it = data_.find(backend);
    return it == data_.end() ? nullptr : it->second.get();
  }
  void set_data(const std::string& backend, std::unique_ptr<BackendComm> comm) { data_[backend] = std::move(comm); }

 private:
  int id_;
  std::vector<int> global_ranks_;
  int rank_;
  ControlChannel* control_;
  std::map<std::string, std::unique_ptr<BackendComm>> data_;
};

// "[0, 2, 3]"
std::string ranks_string(const std::vector<int>& ranks);

}  // namespace hvd::detail
