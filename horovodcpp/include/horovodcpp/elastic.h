// Elastic training, the program's side. hvdrun does not repair MPI in place: when a host is lost
// or added it relaunches the job, and the program resumes from the newest commit. A commit is a
// snapshot of the whole training state that every host keeps a copy of (the replicas are
// identical, so no shared storage is needed); work since the last commit is redone, nothing
// before it.
//
//   hvd::init();
//   hvd::torch::elastic::State state(*model, optimizer);
//   state.track("epoch", epoch).track("step", step);
//   hvd::elastic::run(state, [&](auto& s) {
//     for (; epoch < epochs; ++epoch) { ...; ++step; if (step % 10 == 0) s.commit(); }
//   });
//
// Every function here is a collective unless it says otherwise: call it on every rank, in the
// same order, from the training thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "horovodcpp/horovod.h"

namespace hvd::elastic {

// Every rank's exit code when the job stopped at a commit because hvdrun announced a change of
// hosts (EX_TEMPFAIL: "try again"); hvdrun relaunches at the new size.
constexpr int kHostsChangedExitCode = 75;

// Thrown by State::commit() on every rank, after the commit is on disk, when hvdrun announced a
// change of hosts. run() catches it and ends the process with kHostsChangedExitCode.
class HostsChanged : public Error {
 public:
  using Error::Error;
};

// The training state that survives a relaunch. Subclasses say how the state becomes bytes and
// back (hvd::torch::elastic::State does this for a model, its optimizer and tracked values).
// Owned by the user; used by the training thread.
class State {
 public:
  State();
  virtual ~State();
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  // Snapshots the state on every rank and writes it, atomically, to this host's commit store
  // (HOROVOD_ELASTIC_DIR, default <temp dir>/horovodcpp-elastic/<job>). Then, if hvdrun has
  // announced a change of hosts, throws HostsChanged on every rank.
  void commit();
  // The newest commit taken or restored (0: none yet). The same on every rank.
  std::int64_t commit_id() const { return commit_id_; }
  // The world size when the restored commit was taken (0: started fresh).
  int restored_world_size() const { return restored_world_size_; }
  // Runs after a restore at a different world size than the commit was taken at (e.g. to
  // rescale the learning rate), on every rank. Not collective itself.
  void on_reset(std::function<void()> callback);
  // Makes every rank's state rank 0's (Horovod's state.sync()).
  void sync();

  // Used by run(): agree on the newest commit any rank holds, load it everywhere from the rank
  // that has it (or rank 0's current state when there is none), and give every host a copy.
  void restore();
  // This host's commit store (the first call is a collective when HOROVOD_ELASTIC_JOB is unset:
  // rank 0 names the job).
  const std::string& store_dir();

 protected:
  virtual std::string serialize() const = 0;
  virtual void deserialize(const std::string& bytes) = 0;

 private:
  std::int64_t commit_id_ = 0;
  int restored_world_size_ = 0;
  std::string store_dir_;
  std::vector<std::function<void()>> reset_callbacks_;
};

namespace detail {
void run_elastic(State& state, const std::function<void()>& train);
}

// Initialises horovodcpp if needed, restores `state` (State::restore), and calls fn(state).
// When a commit stops the run for a change of hosts, shuts down and exits the process with
// kHostsChangedExitCode; any other exception propagates (hvdrun then relaunches without the
// failed slot). Returns when fn returns.
template <class S, class Fn>
void run(S& state, Fn&& fn) {
  static_assert(std::is_base_of_v<State, S>, "hvd::elastic::run needs an hvd::elastic::State");
  detail::run_elastic(state, [&] { fn(state); });
}

// Hands out the indices of one epoch so that a job resumed mid-epoch at any world size neither
// repeats nor skips a sample (Horovod's ElasticSampler). Step i of the current layout takes the
// next size*batch_size of the indices not yet processed; rank r gets its block of them (the last
// step may be short, or empty on some ranks). record_batch() marks a step done on every rank, so
// the state is the same everywhere and a commit carries it. Not a collective; training thread.
class ElasticSampler {
 public:
  explicit ElasticSampler(std::int64_t dataset_size, bool shuffle = true, std::uint64_t seed = 0);

  // Starts `epoch` with nothing processed; the same epoch again keeps what was processed (so a
  // loop that calls set_epoch(epoch) first resumes correctly after a restore).
  void set_epoch(std::int64_t epoch);
  std::int64_t epoch() const { return epoch_; }
  // Steps left in this epoch at the current world size (the same on every rank).
  std::int64_t num_batches(std::int64_t batch_size) const;
  // This rank's indices for step `step` of the current layout.
  std::vector<std::int64_t> batch(std::int64_t step, std::int64_t batch_size) const;
  // Marks step `step` (of every rank) processed. Steps are recorded in order.
  void record_batch(std::int64_t step, std::int64_t batch_size);
  // Samples processed in this epoch, over all ranks.
  std::int64_t processed_count() const;

  // Lays out the remaining indices for `rank` of `size` (done by set_epoch and load with
  // hvd::rank()/hvd::size() when horovodcpp is initialised); steps restart from 0.
  void reshard(int rank, int size);
  // [epoch, seed, dataset size, shuffle, processed indices...], for a State to carry.
  std::vector<std::int64_t> save() const;
  void load(const std::vector<std::int64_t>& saved);

 private:
  void reshard_to_runtime();
  std::int64_t dataset_size_;
  bool shuffle_;
  std::uint64_t seed_;
  std::int64_t epoch_ = 0;
  int rank_ = 0;
  int size_ = 1;
  std::vector<std::int64_t> processed_;  // before the current layout, in processing order
  std::vector<std::int64_t> remaining_;  // the current layout's order
  std::int64_t done_in_layout_ = 0;      // leading entries of remaining_ processed
};

}  // namespace hvd::elastic
