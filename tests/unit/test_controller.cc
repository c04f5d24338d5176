// The Controller with N simulated ranks over an in-process channel.
#include <catch2/catch.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "controller_harness.h"

using namespace hvd;
using namespace hvd::detail;
using hvd::test::allreduce_request;
using hvd::test::names_of;
using hvd::test::run_controllers;

namespace {

// The cycle in which `name` first appears on `rank`, or -1.
int cycle_of(const hvd::test::RunResult& run, int rank, const std::string& name) {
  for (std::size_t c = 0; c < run.lists[rank].size(); ++c)
    for (const auto& n : names_of(run.lists[rank][c]))
      if (n == name) return static_cast<int>(c);
  return -1;
}

void require_identical_across_ranks(const hvd::test::RunResult& run) {
  for (std::size_t rank = 1; rank < run.lists.size(); ++rank)
    for (std::size_t c = 0; c < run.lists[0].size(); ++c) {
      INFO("rank " << rank << " cycle " << c);
      REQUIRE(run.lists[rank][c].responses == run.lists[0][c].responses);
    }
}

const Response& only_response(const hvd::test::RunResult& run, int rank, int cycle) {
  REQUIRE(run.lists[rank][cycle].responses.size() == 1);
  return run.lists[rank][cycle].responses[0];
}

}  // namespace

TEST_CASE("a tensor is released only in the cycle its last rank submits it", "[controller]") {
  auto run = run_controllers(3, 5, [](int rank, int cycle) {
    std::vector<Request> r;
    if (cycle == rank) r.push_back(allreduce_request("x", {4}));
    return r;
  });
  for (int rank = 0; rank < 3; ++rank) REQUIRE(cycle_of(run, rank, "x") == 2);
  require_identical_across_ranks(run);
}

TEST_CASE("every rank gets the same responses in the same order", "[controller]") {
  const int size = 4, tensors = 24;
  auto run = run_controllers(size, 12, [&](int rank, int cycle) {
    std::vector<Request> r;
    // Each rank submits the tensors in its own order (a permutation), spread over cycles.
    const int multiplier[] = {1, 5, 7, 11};  // coprime with 24
    for (int k = 0; k < tensors; ++k) {
      int t = (k * multiplier[rank] + 3 * rank) % tensors;
      if (k / 3 == cycle) r.push_back(allreduce_request("t" + std::to_string(t), {t + 1}));
    }
    return r;
  }, ControllerOptions{0, 1024, {}});
  require_identical_across_ranks(run);
  std::multiset<std::string> released;
  for (const auto& list : run.lists[0])
    for (const auto& n : names_of(list)) released.insert(n);
  REQUIRE(released.size() == tensors);
  for (int t = 0; t < tensors; ++t) REQUIRE(released.count("t" + std::to_string(t)) == 1);
}

TEST_CASE("allreduces fuse up to the threshold and no further", "[controller][fusion]") {
  ControllerOptions options;
  options.fusion_threshold_bytes = 3 * 100 * 4;  // three float32[100]
  auto run = run_controllers(2, 1, [](int, int) {
    std::vector<Request> r;
    for (int i = 0; i < 7; ++i) r.push_back(allreduce_request("f" + std::to_string(i), {100}));
    r.push_back(allreduce_request("d", {100}, DataType::Float64));  // another dtype never fuses
    return r;
  }, options);
  require_identical_across_ranks(run);
  const auto& responses = run.lists[0][0].responses;
  std::vector<std::size_t> sizes;
  for (const auto& r : responses) {
    REQUIRE(r.total_bytes() <= options.fusion_threshold_bytes);
    sizes.push_back(r.names.size());
  }
  REQUIRE(sizes == std::vector<std::size_t>{3, 3, 1, 1});
  REQUIRE(responses[3].dtype == DataType::Float64);
}

TEST_CASE("a threshold of 0 disables fusion", "[controller][fusion]") {
  ControllerOptions options;
  options.fusion_threshold_bytes = 0;
  auto run = run_controllers(2, 1, [](int, int) {
    return std::vector<Request>{allreduce_request("a", {2}), allreduce_request("b", {2})};
  }, options);
  REQUIRE(run.lists[0][0].responses.size() == 2);
}

TEST_CASE("a tensor seen before hits the cache and skips the gather", "[controller][cache]") {
  auto run = run_controllers(3, 6, [](int, int cycle) {
    std::vector<Request> r;
    if (cycle % 2 == 0) r.push_back(allreduce_request("g", {8}));
    return r;
  });
  require_identical_across_ranks(run);
  for (int c : {0, 2, 4}) REQUIRE(names_of(run.lists[0][c]) == std::vector<std::string>{"g"});
  for (int rank = 0; rank < 3; ++rank) {
    REQUIRE(run.stats[rank].slow_path_cycles == 1);  // only the first submission
    REQUIRE(run.stats[rank].cache_hits == 2);
  }
  REQUIRE(run.lists[0][4].responses[0].shapes == std::vector<TensorShape>{{8}});
}

TEST_CASE("a cached name with new parameters is invalidated and renegotiated", "[controller][cache]") {
  auto run = run_controllers(2, 4, [](int, int cycle) {
    std::vector<Request> r;
    if (cycle == 0 || cycle == 1) r.push_back(allreduce_request("g", {8}));
    if (cycle >= 2) r.push_back(allreduce_request("g", {9}));
    return r;
  });
  require_identical_across_ranks(run);
  REQUIRE(only_response(run, 0, 1).shapes[0] == TensorShape{8});
  REQUIRE(only_response(run, 0, 2).shapes[0] == TensorShape{9});
  REQUIRE(only_response(run, 0, 3).shapes[0] == TensorShape{9});
  for (int rank = 0; rank < 2; ++rank) {
    REQUIRE(run.stats[rank].cache_invalidations == 1);
    REQUIRE(run.stats[rank].cache_hits == 2);  // cycles 1 and 3
  }
}

TEST_CASE("one rank changing a cached tensor's shape gets a mismatch error on every rank", "[controller][cache]") {
  auto run = run_controllers(2, 3, [](int rank, int cycle) {
    std::vector<Request> r;
    if (cycle == 0) r.push_back(allreduce_request("g", {8}));
    if (cycle == 1) r.push_back(allreduce_request("g", {rank == 0 ? 8 : 5}));
    return r;
  });
  require_identical_across_ranks(run);
  const Response& r = only_response(run, 1, 1);
  REQUIRE(r.type == ResponseType::Error);
  REQUIRE_THAT(r.error, Catch::Contains("'g'") && Catch::Contains("[8]") && Catch::Contains("[5]") &&
                            Catch::Contains("rank 0") && Catch::Contains("rank 1"));
}

TEST_CASE("the response cache evicts the least recently used entry at capacity", "[controller][cache]") {
  ControllerOptions options;
  options.cache_capacity = 2;
  auto run = run_controllers(2, 6, [](int, int cycle) {
    const char* order[] = {"a", "b", "a", "c", "a", "b"};  // c evicts b; b misses again
    return std::vector<Request>{allreduce_request(order[cycle], {1})};
  }, options);
  require_identical_across_ranks(run);
  for (int rank = 0; rank < 2; ++rank) {
    REQUIRE(run.stats[rank].cache_hits == 2);        // the second and third "a"
    REQUIRE(run.stats[rank].slow_path_cycles == 4);  // a, b, c, b
  }
}

namespace {
Request mismatching(int rank, const std::string& what) {
  Request r = allreduce_request("m", {4});
  if (rank == 0) return r;
  if (what == "dtype") r.dtype = DataType::Int32;
  if (what == "shape") r.shape = {2, 2};
  if (what == "op") r.reduce_op = ReduceOp::Max;
  if (what == "type") r.type = RequestType::Broadcast;
  if (what == "prescale") r.prescale_factor = 0.5;
  if (what == "postscale") r.postscale_factor = 2;
  if (what == "device") r.device = 0;
  return r;
}
}  // namespace

TEST_CASE("disagreeing ranks get an error naming the tensor, the ranks and both values", "[controller][errors]") {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"dtype", {"data types", "float32", "int32"}},   {"shape", {"shapes", "[4]", "[2, 2]"}},
      {"op", {"reduce ops", "Sum", "Max"}},            {"type", {"collective operations", "ALLREDUCE", "BROADCAST"}},
      {"prescale", {"prescale factors", "1", "0.5"}},  {"postscale", {"postscale factors", "1", "2"}},
      {"device", {"devices", "host", "GPU 0"}},
  };
  for (const auto& [what, expected] : cases) {
    SECTION(what) {
      auto run = run_controllers(3, 2, [&, w = what](int rank, int cycle) {
        std::vector<Request> r;
        if (cycle == 0) r.push_back(mismatching(rank, w));
        if (cycle == 1) r.push_back(allreduce_request("next", {1}));  // the next operation still works
        return r;
      });
      require_identical_across_ranks(run);
      const Response& error = only_response(run, 2, 0);
      REQUIRE(error.type == ResponseType::Error);
      REQUIRE(error.names == std::vector<std::string>{"m"});
      for (const auto& piece : expected) REQUIRE_THAT(error.error, Catch::Contains(piece));
      REQUIRE_THAT(error.error, Catch::Contains("'m'") && Catch::Contains("rank 0") && Catch::Contains("rank 1"));
      REQUIRE(only_response(run, 0, 1).type == ResponseType::Allreduce);
    }
  }
}

TEST_CASE("broadcasts with different roots are an error", "[controller][errors]") {
  auto run = run_controllers(2, 1, [](int rank, int) {
    Request r = allreduce_request("b", {3});
    r.type = RequestType::Broadcast;
    r.root = rank;  // 0 and 1
    return std::vector<Request>{r};
  });
  REQUIRE_THAT(only_response(run, 0, 0).error, Catch::Contains("broadcast roots") && Catch::Contains("root 1"));
}

TEST_CASE("allgather takes a different first dimension on each rank", "[controller]") {
  auto run = run_controllers(3, 1, [](int rank, int) {
    Request r = allreduce_request("ag", {rank + 1, 5});
    r.type = RequestType::Allgather;
    return std::vector<Request>{r};
  });
  const Response& r = only_response(run, 1, 0);
  REQUIRE(r.type == ResponseType::Allgather);
  REQUIRE(r.first_dims == std::vector<std::int64_t>{1, 2, 3});
}

TEST_CASE("a joined rank lets allreduces complete and join reports the last rank", "[controller][join]") {
  auto join = [] {
    Request r;
    r.type = RequestType::Join;
    r.name = kJoinTensorName;
    return r;
  };
  auto run = run_controllers(3, 5, [&](int rank, int cycle) {
    std::vector<Request> r;
    if (cycle == 0 && rank == 1) r.push_back(join());
    if (cycle == 1 && rank != 1) r.push_back(allreduce_request("a", {2}));
    if (cycle == 2 && rank != 1) {
      Request g = allreduce_request("gather", {2});
      g.type = RequestType::Allgather;
      r.push_back(g);
    }
    if (cycle == 3 && rank == 2) r.push_back(join());
    if (cycle == 4 && rank == 0) r.push_back(join());
    return r;
  });
  require_identical_across_ranks(run);
  REQUIRE(only_response(run, 1, 1).type == ResponseType::Allreduce);
  REQUIRE(only_response(run, 1, 1).shapes[0] == TensorShape{2});  // rank 1 can build zeros
  const Response& refused = only_response(run, 1, 2);
  REQUIRE(refused.type == ResponseType::Error);
  REQUIRE_THAT(refused.error, Catch::Contains("'gather'") && Catch::Contains("rank 1 has joined"));
  REQUIRE(run.lists[0][3].responses.empty());
  const Response& joined = only_response(run, 2, 4);
  REQUIRE(joined.type == ResponseType::Join);
  REQUIRE(joined.last_joined_rank == 0);
}

TEST_CASE("a group is released together once every member is ready everywhere", "[controller][group]") {
  auto run = run_controllers(2, 3, [](int rank, int cycle) {
    std::vector<Request> r;
    if (cycle == rank) {
      for (int i = 0; i < 3; ++i) {
        Request m = allreduce_request("grp." + std::to_string(i), {i + 1});
        m.group = "grp";
        m.group_size = 3;
        r.push_back(m);
      }
    }
    return r;
  });
  require_identical_across_ranks(run);
  REQUIRE(run.lists[0][0].responses.empty());
  REQUIRE(names_of(run.lists[0][1]) == std::vector<std::string>{"grp.0", "grp.1", "grp.2"});
}

namespace {
Request group_member(const std::string& group, int index, int group_size, TensorShape shape = {1}) {
  Request m = allreduce_request(group + "." + std::to_string(index), std::move(shape));
  m.group = group;
  m.group_size = group_size;
  return m;
}
}  // namespace

TEST_CASE("a group submitted again with one member changed is renegotiated whole", "[controller][group]") {
  auto run = run_controllers(2, 4, [](int, int cycle) {
    std::vector<Request> r;
    if (cycle == 0 || cycle == 2)
      for (int i = 0; i < 3; ++i) r.push_back(group_member("grp", i, 3, {cycle == 2 && i == 1 ? 7 : 1}));
    return r;
  });
  require_identical_across_ranks(run);
  REQUIRE(names_of(run.lists[0][2]) == std::vector<std::string>{"grp.0", "grp.1", "grp.2"});
  REQUIRE(run.lists[0][2].responses[0].shapes[1] == TensorShape{7});
  for (int rank = 0; rank < 2; ++rank) REQUIRE(run.stats[rank].cache_hits == 0);  // groups never come from the cache
}

TEST_CASE("ranks that disagree on a group's size fail every member on every rank", "[controller][group][errors]") {
  auto run = run_controllers(2, 2, [](int rank, int cycle) {
    std::vector<Request> r;
    const int group_size = rank == 0 ? 2 : 3;
    if (cycle == 0)
      for (int i = 0; i < group_size; ++i) r.push_back(group_member("grp", i, group_size));
    if (cycle == 1) r.push_back(allreduce_request("after", {1}));
    return r;
  });
  require_identical_across_ranks(run);
  const auto& failed = run.lists[1][0].responses;
  REQUIRE(failed.size() == 3);
  for (const auto& r : failed) {
    REQUIRE(r.type == ResponseType::Error);
    REQUIRE_THAT(r.error, Catch::Contains("group sizes") && Catch::Contains("'grp'") &&
                              Catch::Contains("rank 0 submitted 2") && Catch::Contains("rank 1 submitted 3"));
  }
  REQUIRE(names_of(run.lists[1][0]) == std::vector<std::string>{"grp.0", "grp.1", "grp.2"});
  REQUIRE(only_response(run, 1, 1).type == ResponseType::Allreduce);  // the next operation still runs
}

TEST_CASE("a group completed by a joined rank is released once", "[controller][group][join]") {
  auto run = run_controllers(2, 4, [](int rank, int cycle) {
    std::vector<Request> r;
    if (cycle == 0 && rank == 0) {
      Request join;
      join.type = RequestType::Join;
      join.name = kJoinTensorName;
      r.push_back(join);
    }
    // The API sends a rank's whole group in one cycle; members arriving apart (while rank 0 has
    // joined, so each is ready at once) exercise the coordinator's guard against double release.
    if (rank == 1 && (cycle == 1 || cycle == 2)) r.push_back(group_member("grp", cycle - 1, 2));
    return r;
  });
  require_identical_across_ranks(run);
  std::vector<std::string> released;
  for (const auto& list : run.lists[1])
    for (const auto& n : names_of(list)) released.push_back(n);
  REQUIRE(released == std::vector<std::string>{"grp.0", "grp.1"});
}

TEST_CASE("a stall past the shutdown time stops every rank naming the tensor and missing rank", "[controller][stall]") {
  ControllerOptions options;
  options.stall.warning_seconds = 0.05;
  options.stall.shutdown_seconds = 0.2;
  auto run = run_controllers(3, 160, [](int rank, int cycle) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::vector<Request> r;
    if (cycle == 0 && rank != 2) r.push_back(allreduce_request("stuck", {1}));
    return r;
  }, options);
  int stopped_at = -1;
  for (std::size_t c = 0; c < run.lists[0].size() && stopped_at < 0; ++c)
    if (run.lists[0][c].shutdown) stopped_at = static_cast<int>(c);
  REQUIRE(stopped_at > 0);
  for (int rank = 0; rank < 3; ++rank) {
    const auto& list = run.lists[rank][stopped_at];
    REQUIRE(list.shutdown);
    REQUIRE_THAT(list.shutdown_reason, Catch::Contains("'stuck'") && Catch::Contains("rank 2") &&
                                           Catch::Contains("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"));
  }
}

TEST_CASE("a shutdown wish on one rank reaches every rank in the same cycle", "[controller]") {
  auto rendezvous = std::make_shared<hvd::test::Rendezvous>(2);
  std::array<std::atomic<bool>, 2> stopped{};  // written by two threads: no shared bit words
  std::array<std::vector<int>, 2> who;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank)
    threads.emplace_back([&, rank] {
      hvd::test::FakeChannel channel(rendezvous, rank);
      Controller controller(channel, {});
      controller.compute_response_list({}, false);
      const auto list = controller.compute_response_list({}, rank == 1);
      stopped[rank] = list.shutdown;
      who[rank] = list.shutdown_ranks;
    });
  for (auto& t : threads) t.join();
  REQUIRE(stopped[0]);
  REQUIRE(stopped[1]);
  // Every rank learns which rank asked, so its error can name it.
  CHECK(who[0] == std::vector<int>{1});
  CHECK(who[1] == std::vector<int>{1});
}


// See Note [A failed process set stops every rank] (core/cycle.h).
// Two of the reasons are the same text (two members of one set), one differs (another set's).
TEST_CASE("a failure some ranks bring reaches every rank with each distinct reason, in rank order", "[controller]") {
  for (bool in_set : {false, true}) {
    INFO((in_set ? "a set's controller (global ranks 3, 5, 6, 9)" : "the global controller"));
    ControllerOptions options;
    if (in_set) options.group = {{3, 5, 6, 9}, "process set 4 (ranks [3, 5, 6, 9])"};
    auto rendezvous = std::make_shared<hvd::test::Rendezvous>(4);
    std::array<ResponseList, 4> first, second;
    std::vector<std::thread> threads;
    for (int rank = 0; rank < 4; ++rank)
      threads.emplace_back([&, rank] {
        hvd::test::FakeChannel channel(rendezvous, rank);
        Controller controller(channel, options);
        // Cycle 0: nobody fails, and an allreduce completes. Cycle 1: ranks 1, 2 and 3 fail (1 and
        // 2 alike), while rank 0 sends a new tensor (the slow path runs in the same cycle).
        first[rank] = controller.compute_response_list({allreduce_request("x", {2})}, false);
        std::vector<Request> requests;
        if (rank == 0) requests.push_back(allreduce_request("y", {2}));
        const std::string failure = rank == 0 ? "" : rank == 3 ? "trouble in set 2" : "trouble in set 1";
        second[rank] = controller.compute_response_list(std::move(requests), false, failure);
      });
    for (auto& t : threads) t.join();
    const std::string one = in_set ? "5" : "1", two = in_set ? "6" : "2", three = in_set ? "9" : "3";
    for (int rank = 0; rank < 4; ++rank) {
      INFO("rank " << rank);
      CHECK_FALSE(first[rank].shutdown);
      CHECK(first[rank].shutdown_reason.empty());
      CHECK(names_of(first[rank]) == std::vector<std::string>{"x"});
      CHECK(second[rank].shutdown);
      CHECK(second[rank].shutdown_reason == "ranks " + one + ", " + two + ", " + three + " stopped; rank " + one +
                                                ": trouble in set 1; rank " + three + ": trouble in set 2");
      CHECK(second[rank].shutdown_ranks == std::vector<int>{1, 2, 3});  // ranks in the group, as for a wish to stop
      CHECK(second[rank].responses.empty());  // "y" waits for the other ranks still
    }
  }
}

// See Note [A collective one rank cannot run fails on every rank] (core/api.cc).
TEST_CASE("a rank that withdraws a name fails it on every rank, naming the rank and the reason", "[controller][errors]") {
  for (bool cached : {false, true}) {
    INFO((cached ? "after the name was cached" : "a fresh name"));
    // Cycle 0 (when cached): every rank runs "g" normally. Then rank 2 withdraws it, late, while
    // the others have submitted it and wait; then "g" runs normally again.
    auto result = run_controllers(3, 6, [cached](int rank, int cycle) -> std::vector<Request> {
      const int start = cached ? 1 : 0;
      if (cycle == 0 && cached) return {allreduce_request("g", {4})};
      if (cycle == start && rank != 2) return {allreduce_request("g", {4})};
      if (cycle == start + 2 && rank == 2) {
        Request withdrawn = allreduce_request("g", {});
        withdrawn.error = "its model differs";
        return {withdrawn};
      }
      if (cycle == start + 3) return {allreduce_request("g", {4})};
      return {};
    });
    for (int rank = 0; rank < 3; ++rank) {
      INFO("rank " << rank);
      const int start = cached ? 1 : 0;
      for (int c = start; c < start + 2; ++c) CHECK(result.lists[rank][c].responses.empty());
      const auto& failed = result.lists[rank][start + 2].responses;
      REQUIRE(failed.size() == 1);
      CHECK(failed[0].type == ResponseType::Error);
      CHECK(failed[0].names == std::vector<std::string>{"g"});
      CHECK(failed[0].error == "ALLREDUCE of 'g' cannot run: rank 2 did not submit it (its model differs)");
      const auto& again = result.lists[rank][start + 3].responses;
      REQUIRE(again.size() == 1);  // nothing of the withdrawal is left behind
      CHECK(again[0].type == ResponseType::Allreduce);
    }
  }
}
