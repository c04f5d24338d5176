// A fake world for N simulated ranks in one process (threads as ranks), beside the fake channel:
// a Transport for the Runtime whose World and Backend need no MPI. Every group (the world, each
// process set) negotiates over FakeChannels on a Rendezvous of its own; the FAKE backend runs
// allreduce (float32, int32: sum, average) and barrier by exchanging bytes through the same
// rendezvous; and each rank logs what it releases (the backend's shutdown, a group's data
// communicator, the world's finalize) in order. So the Runtime's Cycle and Executor, process-set
// changes and shutdown run in unit tests without mpirun.
#pragma once

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/backend.h"
#include "core/collective_op.h"
#include "core/op_registry.h"
#include "core/runtime.h"
#include "fake_channel.h"

namespace hvd::test {

// What the simulated ranks share: the groups' rendezvous and the log of releases.
class FakeCluster {
 public:
  explicit FakeCluster(int size) : size_(size) {}
  int size() const { return size_; }
  // The rendezvous of the group with this id and these global ranks (made by its first member).
  std::shared_ptr<Rendezvous> group(int id, const std::vector<int>& ranks) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& slot = groups_[{id, ranks}];
    if (!slot) slot = std::make_shared<Rendezvous>(static_cast<int>(ranks.size()));
    return slot;
  }
  void log(int rank, const std::string& event) {
    std::lock_guard<std::mutex> lock(mutex_);
    events_[rank].push_back(event);
  }
  std::vector<std::string> events(int rank) {
    std::lock_guard<std::mutex> lock(mutex_);
    return events_[rank];
  }

 private:
  int size_;
  std::mutex mutex_;
  std::map<std::pair<int, std::vector<int>>, std::shared_ptr<Rendezvous>> groups_;
  std::map<int, std::vector<std::string>> events_;
};

// A group's data communicator for the FAKE backend: its channel (which the Communicator
// negotiates over) and the data exchange; logs its release.
class FakeGroupComm final : public detail::BackendComm {
 public:
  FakeGroupComm(FakeCluster& cluster, int global_rank, int id, std::shared_ptr<Rendezvous> rendezvous, int rank)
      : cluster_(cluster), global_rank_(global_rank), id_(id), rendezvous_(rendezvous), channel_(rendezvous, rank),
        rank_(rank) {}
  ~FakeGroupComm() override { cluster_.log(global_rank_, "group " + std::to_string(id_) + " released"); }
  FakeChannel& channel() { return channel_; }
  std::vector<std::vector<std::uint8_t>> exchange(std::vector<std::uint8_t> mine) {
    return rendezvous_->exchange(rank_, std::move(mine));
  }

 private:
  FakeCluster& cluster_;
  int global_rank_, id_;
  std::shared_ptr<Rendezvous> rendezvous_;
  FakeChannel channel_;
  int rank_;
};

// A Communicator whose channel and data are a FakeGroupComm.
inline std::unique_ptr<detail::Communicator> fake_group(FakeCluster& cluster, int global_rank, int id,
                                                        const std::vector<int>& ranks) {
  int index = -1;
  for (std::size_t i = 0; i < ranks.size(); ++i)
    if (ranks[i] == global_rank) index = static_cast<int>(i);
  if (index < 0) return nullptr;
  auto data = std::make_unique<FakeGroupComm>(cluster, global_rank, id, cluster.group(id, ranks), index);
  auto group = std::make_unique<detail::Communicator>(id, ranks, index, data->channel());
  group->set_data("FAKE", std::move(data));
  return group;
}

class FakeLiveness final : public detail::LivenessChannel {
 public:
  void send_waiting() override {}
  std::vector<int> receive_reports() override { return {}; }
  int send_failure(const std::string&, std::chrono::milliseconds) override { return 0; }
  std::optional<detail::FailureNotice> receive_failure() override { return std::nullopt; }
  void send_failure_seen(int) override {}
  void send_abort_notice(const std::string&) override {}
  std::vector<std::string> receive_abort_notices() override { return {}; }
  void send_set_failure_seen(int, const std::vector<int>&) override {}
  std::vector<std::pair<int, int>> receive_set_failures_seen() override { return {}; }
};

// Each rank on a node of its own: local groups of one, the cross group is the world.
class FakeWorld final : public detail::World {
 public:
  FakeWorld(FakeCluster& cluster, int rank) : cluster_(cluster), rank_(rank) {
    std::vector<int> all(cluster.size());
    for (int r = 0; r < cluster.size(); ++r) all[r] = r;
    global_ = fake_group(cluster, rank, 0, all);
    local_ = fake_group(cluster, rank, detail::Communicator::kLocalId, {rank});
    cross_ = fake_group(cluster, rank, detail::Communicator::kCrossId, all);
  }
  int rank() const override { return rank_; }
  int size() const override { return cluster_.size(); }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  int cross_rank() const override { return rank_; }
  int cross_size() const override { return cluster_.size(); }
  bool homogeneous() const override { return true; }
  detail::ControlChannel& control() override { return global_->control(); }
  detail::Communicator& global() override { return *global_; }
  detail::Communicator& local() override { return *local_; }
  detail::Communicator& cross() override { return *cross_; }
  std::unique_ptr<detail::Communicator> create_communicator(int id, const std::vector<int>& global_ranks) override {
    return fake_group(cluster_, rank_, id, global_ranks);
  }
  detail::LivenessChannel& liveness() override { return liveness_; }
  detail::Status host_allreduce(void*, std::int64_t, DataType, ReduceOp, detail::CommScope) override {
    return detail::Status::error("the fake world has no host collectives");
  }
  void finalize() override { cluster_.log(rank_, "world finalized"); }
  void abandon() override { cluster_.log(rank_, "world abandoned"); }

 private:
  FakeCluster& cluster_;
  int rank_;
  std::unique_ptr<detail::Communicator> global_, local_, cross_;
  FakeLiveness liveness_;
};

// Allreduce of float32 and int32 tensors (sum, average) through the group's rendezvous. A tensor
// named "fail_on_rank<N>.*" fails on rank N of the group after the exchange (the others complete);
// one named "throws.*" makes the op's selection throw on every rank, before any exchange.
class FakeAllreduce final : public detail::CollectiveOp {
 public:
  const char* backend() const override { return "FAKE"; }
  bool enabled(const detail::Response&, const std::vector<detail::TensorTableEntry>& entries,
               const detail::Communicator&) const override {
    if (!entries.empty() && entries.front().name.rfind("throws.", 0) == 0)
      throw std::runtime_error("injected exception");
    return entries.empty() || entries.front().device == kCpuDevice;
  }
  detail::Status execute(std::vector<detail::TensorTableEntry>& entries, const detail::Response& response,
                         const detail::Communicator& group) override {
    auto& data = dynamic_cast<FakeGroupComm&>(*group.data("FAKE"));
    for (auto& e : entries) {
      const auto* in = static_cast<const std::uint8_t*>(e.input->data());
      auto all = data.exchange(std::vector<std::uint8_t>(in, in + e.input->size_bytes()));
      const std::int64_t n = e.input->num_elements();
      if (e.input->dtype() == DataType::Float32)
        reduce<float>(all, n, response.reduce_op, group.size(), e.output->data());
      else if (e.input->dtype() == DataType::Int32)
        reduce<std::int32_t>(all, n, response.reduce_op, group.size(), e.output->data());
      else
        return detail::Status::error("the fake backend has no allreduce of " + std::string(dtype_name(e.input->dtype())));
      if (e.name.rfind("fail_on_rank" + std::to_string(group.rank()) + ".", 0) == 0)
        return detail::Status::error("injected failure");
    }
    return detail::Status::ok();
  }

 private:
  template <class T>
  static void reduce(const std::vector<std::vector<std::uint8_t>>& all, std::int64_t n, ReduceOp op, int size,
                     void* out) {
    std::vector<T> acc(n, T(0));
    for (const auto& bytes : all)
      for (std::int64_t i = 0; i < n; ++i) {
        T v;
        std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
        acc[i] += v;
      }
    if (op == ReduceOp::Average)
      for (auto& v : acc) v /= static_cast<T>(size);
    std::memcpy(out, acc.data(), n * sizeof(T));
  }
};

class FakeBarrier final : public detail::CollectiveOp {
 public:
  const char* backend() const override { return "FAKE"; }
  bool enabled(const detail::Response&, const std::vector<detail::TensorTableEntry>&,
               const detail::Communicator&) const override {
    return true;
  }
  detail::Status execute(std::vector<detail::TensorTableEntry>&, const detail::Response&,
                         const detail::Communicator& group) override {
    dynamic_cast<FakeGroupComm&>(*group.data("FAKE")).exchange({});
    return detail::Status::ok();
  }
};

class FakeBackend final : public detail::Backend {
 public:
  FakeBackend(FakeCluster& cluster, int rank) : cluster_(cluster), rank_(rank) {}
  const char* name() const override { return "FAKE"; }
  void register_ops(detail::OpRegistry& registry, detail::OpContext&) override {
    registry.add(detail::ResponseType::Allreduce, std::make_unique<FakeAllreduce>());
    registry.add(detail::ResponseType::Barrier, std::make_unique<FakeBarrier>());
  }
  void shutdown(detail::WorldEnd end) override {
    cluster_.log(rank_, end == detail::WorldEnd::Abandon ? "backend abandoned" : "backend shut down");
  }
  void forget(const detail::Communicator& group) override {
    cluster_.log(rank_, "backend forgot group " + std::to_string(group.id()));
  }

 private:
  FakeCluster& cluster_;
  int rank_;
};

// The Transport of simulated rank `rank`.
inline detail::Transport fake_transport(FakeCluster& cluster, int rank) {
  detail::Transport t;
  t.create_world = [&cluster, rank](const detail::Settings&) -> std::unique_ptr<detail::World> {
    return std::make_unique<FakeWorld>(cluster, rank);
  };
  t.create_backends = [&cluster, rank](detail::World&) {
    std::vector<std::unique_ptr<detail::Backend>> backends;
    backends.push_back(std::make_unique<FakeBackend>(cluster, rank));
    return backends;
  };
  return t;
}

}  // namespace hvd::test
