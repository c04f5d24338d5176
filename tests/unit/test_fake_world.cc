// The Runtime's cycle on simulated ranks (threads, each with its own Runtime over the fake world,
// tests/unit/fake_world.h): the global set and process sets through the one Cycle path, joins in
// a set, the Executor's process-set changes, a failing op, and the order of shutdown, all
// without mpirun. Results are checked against closed forms; assertions run on the main thread.
#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/process_set_table.h"
#include "core/runtime.h"
#include "fake_world.h"

using hvd::DataType;
using hvd::HostTensor;
using hvd::detail::HandleState;
using hvd::detail::Runtime;
using hvd::detail::Status;
using hvd::test::FakeCluster;

namespace {

constexpr auto kPatience = std::chrono::seconds(20);  // no wait of these tests hangs for longer

// The simulated ranks meet here (a reusable barrier of the test's threads, not of the runtime).
class ThreadBarrier {
 public:
  explicit ThreadBarrier(int size) : size_(size) {}
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const int generation = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait_for(lock, kPatience, [&] { return generation_ != generation; });
  }

 private:
  int size_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int arrived_ = 0;
  int generation_ = 0;
};

// Starts one Runtime per simulated rank over the fake world and runs `body` on each rank's thread;
// then checks that no rank threw.
void run_ranks(FakeCluster& cluster, hvd::detail::Settings settings, std::vector<std::vector<int>> sets,
               const std::function<void(int rank, Runtime& runtime)>& body) {
  std::vector<std::thread> threads;
  std::vector<std::string> thrown(cluster.size());
  for (int rank = 0; rank < cluster.size(); ++rank)
    threads.emplace_back([&, rank] {
      try {
        Runtime runtime(settings, sets, hvd::test::fake_transport(cluster, rank));
        runtime.start();
        body(rank, runtime);
      } catch (const std::exception& e) {
        thrown[rank] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < cluster.size(); ++rank) {
    INFO("rank " << rank);
    CHECK(thrown[rank] == std::string());
  }
}

// The handle's status once it completed, or an error after kPatience.
Status wait(const std::shared_ptr<HandleState>& handle) {
  const auto until = std::chrono::steady_clock::now() + kPatience;
  while (!handle->done()) {
    if (std::chrono::steady_clock::now() > until) return Status::error("timed out");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return handle->wait();
}

struct Submitted {
  std::shared_ptr<HandleState> handle;
  std::shared_ptr<HostTensor> tensor;
  std::vector<float> values() const {
    const float* p = tensor->data_as<float>();
    return std::vector<float>(p, p + tensor->num_elements());
  }
};

// An in-place sum of `values` as hvd::allreduce_async would submit it.
Submitted allreduce(Runtime& rt, const std::string& name, const std::vector<float>& values, int set = 0) {
  auto t = HostTensor::allocate(DataType::Float32, {static_cast<std::int64_t>(values.size())});
  std::copy(values.begin(), values.end(), t->data_as<float>());
  hvd::detail::TensorTableEntry e;
  e.name = name;
  e.type = hvd::detail::RequestType::Allreduce;
  e.input = t;
  e.output = t;
  hvd::detail::Request r;
  r.type = e.type;
  r.name = name;
  r.dtype = DataType::Float32;
  r.shape = t->shape();
  r.reduce_op = hvd::ReduceOp::Sum;
  std::vector<hvd::detail::TensorTableEntry> entries;
  entries.push_back(std::move(e));
  return {rt.enqueue(std::move(entries), {std::move(r)}, set), t};
}

// A request without a tensor (join, or the reserved barriers behind add/remove_process_set).
std::shared_ptr<HandleState> submit(Runtime& rt, hvd::detail::RequestType type, const std::string& name,
                                    hvd::TensorShape shape = {}, int set = 0) {
  hvd::detail::TensorTableEntry e;
  e.name = name;
  e.type = type;
  hvd::detail::Request r;
  r.type = type;
  r.name = name;
  r.shape = std::move(shape);
  std::vector<hvd::detail::TensorTableEntry> entries;
  entries.push_back(std::move(e));
  return rt.enqueue(std::move(entries), {std::move(r)}, set);
}

std::vector<float> ramp(int rank, int n) {  // (rank + 1) * i
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<float>((rank + 1) * i);
  return v;
}

std::vector<float> scaled(float k, int n) {  // k * i
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = k * static_cast<float>(i);
  return v;
}

}  // namespace

TEST_CASE("the global set and a process set reduce in the same cycles, each against its closed form", "[fake_world]") {
  FakeCluster cluster(3);
  std::vector<std::vector<float>> global(3), in_set(3);
  std::vector<std::string> errors(3);
  std::vector<std::uint64_t> cycles(3);
  ThreadBarrier barrier(3);
  run_ranks(cluster, hvd::detail::default_settings(), {{0, 2}}, [&](int rank, Runtime& rt) {
    for (int step = 0; step < 3; ++step) {  // the second and later steps come from the response cache
      auto g = allreduce(rt, "g", ramp(rank, 5));
      Submitted s;
      if (rank != 1) s = allreduce(rt, "s", ramp(rank, 4), 1);
      for (const Status& st : {wait(g.handle), s.handle ? wait(s.handle) : Status::ok()})
        if (!st.is_ok()) errors[rank] += st.message() + "; ";
      global[rank] = g.values();
      if (s.handle) in_set[rank] = s.values();
    }
    cycles[rank] = rt.controller_stats().cycles;
    barrier.arrive_and_wait();
  });
  for (int rank = 0; rank < 3; ++rank) {
    INFO("rank " << rank);
    CHECK(errors[rank].empty());
    CHECK(global[rank] == scaled(1 + 2 + 3, 5));
    if (rank != 1) CHECK(in_set[rank] == scaled(1 + 3, 4));
    CHECK(cycles[rank] >= 3);
  }
}

TEST_CASE("a joined rank of a process set contributes zeros, and its join ends when the last member joins", "[fake_world]") {
  FakeCluster cluster(3);
  std::vector<float> reduced;
  std::vector<int> join_results(3, -2);
  std::vector<std::string> errors(3);
  ThreadBarrier barrier(3);
  run_ranks(cluster, hvd::detail::default_settings(), {{0, 1}}, [&](int rank, Runtime& rt) {
    if (rank == 1) {
      auto join = submit(rt, hvd::detail::RequestType::Join, hvd::detail::kJoinTensorName, {}, 1);
      const Status st = wait(join);
      if (!st.is_ok()) errors[rank] = st.message();
      join_results[rank] = join->join_result;
    } else if (rank == 0) {
      auto j = allreduce(rt, "j", ramp(rank, 4), 1);
      const Status st = wait(j.handle);
      if (!st.is_ok()) errors[rank] = st.message();
      reduced = j.values();
      auto join = submit(rt, hvd::detail::RequestType::Join, hvd::detail::kJoinTensorName, {}, 1);
      wait(join);
      join_results[rank] = join->join_result;
    }
    barrier.arrive_and_wait();
  });
  CHECK(errors[0].empty());
  CHECK(errors[1].empty());
  CHECK(reduced == ramp(0, 4));  // rank 1's part is zeros
  CHECK(join_results[0] == 0);   // the last rank to join, on every member
  CHECK(join_results[1] == 0);
  CHECK(join_results[2] == -2);  // not a member: never joined
}

TEST_CASE("process sets added and removed at run time; a set with work in flight is not removed", "[fake_world]") {
  FakeCluster cluster(3);
  auto settings = hvd::detail::default_settings();
  settings.dynamic_process_sets = true;
  std::vector<int> ids(3, -1);
  std::vector<std::string> refused(3), errors(3), after_removal(3);
  std::vector<std::vector<float>> a(3), b(3);
  ThreadBarrier barrier(3);
  run_ranks(cluster, settings, {}, [&](int rank, Runtime& rt) {
    auto add = submit(rt, hvd::detail::RequestType::Barrier, rt.generate_name(hvd::detail::kAddProcessSetPrefix), {1, 2});
    if (!wait(add).is_ok()) errors[rank] += "add; ";
    const int id = ids[rank] = add->new_process_set_id;
    auto remove = [&] {
      return wait(submit(rt, hvd::detail::RequestType::Barrier,
                         rt.generate_name(hvd::detail::kRemoveProcessSetPrefix), {id}));
    };
    Submitted pending;
    if (rank != 0) {
      auto x = allreduce(rt, "a", ramp(rank, 3), id);
      if (!wait(x.handle).is_ok()) errors[rank] += "a; ";
      a[rank] = x.values();
      if (rank == 1) pending = allreduce(rt, "b", ramp(rank, 3), id);  // rank 2 holds back
    }
    refused[rank] = remove().message();
    if (rank == 2) pending = allreduce(rt, "b", ramp(rank, 3), id);
    if (pending.handle) {
      if (!wait(pending.handle).is_ok()) errors[rank] += "b; ";
      b[rank] = pending.values();
    }
    if (!remove().is_ok()) errors[rank] += "remove; ";
    if (rank != 0) {
      try {
        allreduce(rt, "c", ramp(rank, 3), id);
      } catch (const hvd::Error& e) {
        after_removal[rank] = e.what();
      }
    }
    barrier.arrive_and_wait();
  });
  for (int rank = 0; rank < 3; ++rank) {
    INFO("rank " << rank);
    CHECK(errors[rank].empty());
    CHECK(ids[rank] == 1);
    // Every rank refuses alike, naming the set and the rank with work in flight.
    CHECK(refused[rank] == "hvd::remove_process_set: process set 1 (ranks [1, 2]) still has operations in flight on "
                           "rank 1; wait for them before removing it");
    const auto events = cluster.events(rank);
    const bool forgot = std::find(events.begin(), events.end(), "backend forgot group 1") != events.end();
    const bool released = std::find(events.begin(), events.end(), "group 1 released") != events.end();
    if (rank == 0) {
      CHECK_FALSE(forgot);  // not a member: it has no group to forget
      CHECK_FALSE(released);
    } else {
      CHECK(a[rank] == scaled(2 + 3, 3));
      CHECK(b[rank] == scaled(2 + 3, 3));
      CHECK(forgot);
      CHECK(released);
      CHECK_THAT(after_removal[rank], Catch::Contains("process set 1 was removed"));
    }
  }
}

TEST_CASE("an op that fails on one rank fails its handle there, naming the collective, tensor and rank", "[fake_world]") {
  FakeCluster cluster(2);
  std::string failed;
  std::vector<std::vector<float>> after(2);
  std::vector<std::string> errors(2);
  ThreadBarrier barrier(2);
  run_ranks(cluster, hvd::detail::default_settings(), {}, [&](int rank, Runtime& rt) {
    auto x = allreduce(rt, "fail_on_rank1.x", ramp(rank, 2));
    const Status st = wait(x.handle);
    if (rank == 1) failed = st.message();
    // The runtime goes on: the next collective completes everywhere.
    auto y = allreduce(rt, "y", ramp(rank, 3));
    if (!wait(y.handle).is_ok()) errors[rank] = "y failed";
    after[rank] = y.values();
    barrier.arrive_and_wait();
  });
  CHECK(failed == "ALLREDUCE of 'fail_on_rank1.x' failed on rank 1: injected failure");
  for (int rank = 0; rank < 2; ++rank) {
    CHECK(errors[rank].empty());
    CHECK(after[rank] == scaled(1 + 2, 3));
  }
}

// See Note [An exception in the executor stops every rank] (core/executor.h). Here every rank
// throws, before any exchange, so no rank waits for another; the peers' report is the MPI test's
// (hvd_fault_allocator_np*).
TEST_CASE("an exception in the executor fails its tensor with the reason and stops the rank", "[fake_world]") {
  FakeCluster cluster(2);
  std::vector<std::string> failed(2), reasons(2), later(2);
  std::vector<int> stopped(2);  // not vector<bool>: each rank writes its own element
  run_ranks(cluster, hvd::detail::default_settings(), {}, [&](int rank, Runtime& rt) {
    auto x = allreduce(rt, "throws.x", ramp(rank, 2));
    failed[rank] = wait(x.handle).message();
    // At once, while the background thread may still be on its way to the stop (a race this test
    // does not force; test_tensor_queue checks the refusal itself): the submission is refused as
    // stopped, not taken in and then failed as shut down.
    try {
      allreduce(rt, "after", ramp(rank, 2));
    } catch (const std::exception& e) {
      later[rank] = e.what();
    }
    const auto until = std::chrono::steady_clock::now() + kPatience;
    while (rt.running() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    stopped[rank] = !rt.running() && rt.failed();
    reasons[rank] = rt.stop_reason();
  });
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank);
    const std::string want = "ALLREDUCE of 'throws.x' failed on rank " + std::to_string(rank) + ": injected exception";
    CHECK(failed[rank] == want);
    CHECK(stopped[rank]);
    CHECK(reasons[rank] == want);
    CHECK(later[rank] == "horovodcpp has stopped: " + want);
    // Its backends end their side without waiting for peers (no NCCL finalize that no peer
    // joins), and the world is given up, not finalized.
    std::vector<std::string> events;
    for (const auto& e : cluster.events(rank))
      if (e.rfind("backend ", 0) == 0 || e.rfind("world ", 0) == 0) events.push_back(e);
    CHECK(events == std::vector<std::string>{"backend abandoned", "world abandoned"});
  }
}

TEST_CASE("one rank's shutdown stops every rank: pending work fails, then backends, groups, world are released", "[fake_world]") {
  FakeCluster cluster(3);
  std::vector<std::string> reasons(3), pending(3), late(3);
  std::vector<int> failed(3), stopped(3);  // not vector<bool>: each rank writes its own element
  std::vector<int> rank_after(3, -1);
  ThreadBarrier barrier(3);
  run_ranks(cluster, hvd::detail::default_settings(), {{0, 1}}, [&](int rank, Runtime& rt) {
    Submitted never;
    if (rank == 2) never = allreduce(rt, "never", ramp(rank, 2));  // no other rank submits it
    barrier.arrive_and_wait();
    if (rank == 0) {
      stopped[rank] = rt.stop();
    } else {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (rt.running() && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      stopped[rank] = !rt.running();
      try {
        allreduce(rt, "late", ramp(rank, 2));
      } catch (const hvd::Error& e) {
        late[rank] = e.what();
      }
    }
    if (never.handle) pending[rank] = wait(never.handle).message();
    reasons[rank] = rt.stop_reason();
    failed[rank] = rt.failed();
    rank_after[rank] = rt.topology().rank;  // local queries still answer
  });
  const std::string left = "rank 0 has shut down (hvd::shutdown() or the end of its process) while this rank was "
                           "still running; collectives are no longer possible, but hvd::rank(), hvd::size() and the "
                           "other local queries answer until this rank calls hvd::shutdown()";
  CHECK(reasons[0] == "hvd::shutdown() was called");
  CHECK(reasons[1] == left);
  CHECK(reasons[2] == left);
  CHECK(pending[2] == "horovodcpp shut down before ALLREDUCE of tensor 'never' completed: " + left);
  for (int rank = 0; rank < 3; ++rank) {
    INFO("rank " << rank);
    CHECK(stopped[rank]);
    CHECK_FALSE(failed[rank]);
    CHECK(rank_after[rank] == rank);
    if (rank != 0) CHECK_THAT(late[rank], Catch::Contains("horovodcpp has stopped: " + left));
    // The release order up to the world's finalize; the world's own groups go with the world.
    std::vector<std::string> expected = {"backend shut down"};
    if (rank != 2) expected.push_back("group 1 released");
    expected.push_back("world finalized");
    auto events = cluster.events(rank);
    REQUIRE(events.size() >= expected.size());
    events.resize(expected.size());
    CHECK(events == expected);
  }
}
