// Tuned parameters through the Controller with N simulated ranks: rank 0 proposes, every rank
// applies in the same cycle, and the responses stay identical on every rank.
#include <catch2/catch.hpp>

#include <map>
#include <thread>

#include "controller_harness.h"

using namespace hvd;
using namespace hvd::detail;
using hvd::test::allreduce_request;
using hvd::test::names_of;

namespace {

struct TunedRun {
  std::vector<std::vector<ResponseList>> lists;                          // [rank][cycle]
  std::vector<std::vector<std::optional<TunableParameters>>> applied;    // [rank][cycle]
  std::vector<std::vector<ControllerStats>> stats;                       // [rank][cycle], after it
  std::vector<std::vector<std::size_t>> cache_sizes;                     // [rank][cycle], after it
  std::vector<TunableParameters> final_parameters;                       // [rank]
};

// Like run_controllers, and rank 0 proposes proposals[c] just before cycle c.
TunedRun run_tuned(int size, int cycles, const hvd::test::Script& script,
                   const std::map<int, TunableParameters>& proposals, ControllerOptions options) {
  auto rendezvous = std::make_shared<hvd::test::Rendezvous>(size);
  TunedRun run;
  run.lists.resize(size);
  run.applied.resize(size);
  run.stats.resize(size);
  run.cache_sizes.resize(size);
  run.final_parameters.resize(size);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      hvd::test::FakeChannel channel(rendezvous, rank);
      Controller controller(channel, options);
      for (int c = 0; c < cycles; ++c) {
        auto p = proposals.find(c);
        if (rank == 0 && p != proposals.end()) controller.propose(p->second);
        run.lists[rank].push_back(controller.compute_response_list(script(rank, c), false));
        run.applied[rank].push_back(controller.applied_this_cycle());
        run.stats[rank].push_back(controller.stats());
        run.cache_sizes[rank].push_back(controller.cache().size());
      }
      run.final_parameters[rank] = controller.parameters();
    });
  }
  for (auto& t : threads) t.join();
  return run;
}

void require_identical_across_ranks(const TunedRun& run) {
  for (std::size_t rank = 1; rank < run.lists.size(); ++rank)
    for (std::size_t c = 0; c < run.lists[0].size(); ++c) {
      INFO("rank " << rank << " cycle " << c);
      REQUIRE(run.lists[rank][c].responses == run.lists[0][c].responses);
    }
}

TunableParameters params(std::int64_t threshold, double cycle_ms, bool cache) { return {threshold, cycle_ms, cache}; }

}  // namespace

TEST_CASE("parameters proposed by rank 0 take effect on every rank in the same cycle", "[controller][autotune]") {
  const int size = 3, cycles = 6;
  ControllerOptions options;
  options.fusion_threshold_bytes = 4096;
  options.cycle_time_ms = 1;
  const TunableParameters first = params(1 << 20, 7.5, false), second = params(65536, 2.25, true);
  auto run = run_tuned(size, cycles, [](int, int c) {
    return std::vector<Request>{allreduce_request("t" + std::to_string(c), {8})};
  }, {{2, first}, {4, second}}, options);
  require_identical_across_ranks(run);
  for (int rank = 0; rank < size; ++rank) {
    INFO("rank " << rank);
    for (int c = 0; c < cycles; ++c) {
      INFO("cycle " << c);
      if (c == 2) {
        REQUIRE(run.applied[rank][c] == std::optional<TunableParameters>(first));
      } else if (c == 4) {
        REQUIRE(run.applied[rank][c] == std::optional<TunableParameters>(second));
      } else {
        REQUIRE_FALSE(run.applied[rank][c].has_value());
      }
    }
    CHECK(run.stats[rank].back().parameter_changes == 2);
    CHECK(run.final_parameters[rank] == second);
  }
}

TEST_CASE("a fusion threshold change changes fusion on every rank from that cycle", "[controller][autotune][fusion]") {
  ControllerOptions options;
  options.fusion_threshold_bytes = 0;  // no fusion at first
  // Six float32[100] (400 bytes each) per cycle, submitted again every cycle (cache hits after
  // the first), in an order that differs by rank.
  auto script = [](int rank, int) {
    std::vector<Request> r;
    for (int i = 0; i < 6; ++i) r.push_back(allreduce_request("g" + std::to_string(rank ? 5 - i : i), {100}));
    return r;
  };
  auto run = run_tuned(2, 6, script, {{3, params(1200, 1, true)}}, options);
  require_identical_across_ranks(run);
  for (int rank = 0; rank < 2; ++rank) {
    for (int c = 0; c < 6; ++c) {
      INFO("rank " << rank << " cycle " << c);
      const auto& responses = run.lists[rank][c].responses;
      REQUIRE(names_of(run.lists[rank][c]).size() == 6);
      if (c < 3) {
        CHECK(responses.size() == 6);  // one per tensor
      } else {
        REQUIRE(responses.size() == 2);  // three per response, 1200 bytes each
        for (const auto& r : responses) CHECK(r.names.size() == 3);
      }
    }
  }
  CHECK(run.stats[0].back().cache_hits > 0);  // the fused cycles came from the cache too
}

TEST_CASE("switching the cache off and on mid-stream keeps responses identical and complete", "[controller][autotune][cache]") {
  // Rank r submits round i of tensors a and b in cycle 3i + r: ranks 0 and 1 hold cached
  // requests waiting for rank 2 when the switch comes (cycles 3i + 1 are switch points).
  const int size = 3, rounds = 8, cycles = 3 * rounds;
  auto script = [](int rank, int c) {
    std::vector<Request> r;
    if (c % 3 == rank) {
      r.push_back(allreduce_request("a", {16}));
      r.push_back(allreduce_request("b", {32}));
    }
    return r;
  };
  ControllerOptions options;
  options.fusion_threshold_bytes = 0;
  const int off_at = 3 * 3 + 1, on_at = 3 * 5 + 1;
  auto run = run_tuned(size, cycles, script, {{off_at, params(0, 1, false)}, {on_at, params(0, 1, true)}}, options);
  require_identical_across_ranks(run);
  for (int rank = 0; rank < size; ++rank) {
    INFO("rank " << rank);
    for (int c = 0; c < cycles; ++c) {
      INFO("cycle " << c);
      // Every round is released exactly once, when its last rank submitted it.
      const auto names = names_of(run.lists[rank][c]);
      if (c % 3 == 2) {
        REQUIRE(names.size() == 2);
      } else {
        REQUIRE(names.empty());
      }
      if (c >= off_at && c < on_at) CHECK(run.cache_sizes[rank][c] == 0);
    }
    // Cache hits: rounds 1-2 before the switch (round 0 fills the cache), none while it is off,
    // and after it is on again, round 5 refills it (the switch emptied it) and rounds 6-7 hit.
    CHECK(run.stats[rank][off_at - 1].cache_hits == 4);
    CHECK(run.stats[rank][on_at - 1].cache_hits == 4);
    CHECK(run.cache_sizes[rank][on_at + 1] == 2);
    CHECK(run.stats[rank].back().cache_hits == 8);
  }
}

TEST_CASE("a process set's controller applies parameters between its cycles", "[controller][autotune][cache]") {
  // apply() outside a cycle, at the same point on every rank: waiting cached requests are sent
  // uncached in the next cycle, and the responses stay identical.
  auto rendezvous = std::make_shared<hvd::test::Rendezvous>(2);
  std::vector<std::vector<ResponseList>> lists(2);
  // Checked after the join: Catch2's assertions are not thread-safe.
  std::vector<std::size_t> cache_sizes(2);
  std::vector<std::int64_t> thresholds(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      hvd::test::FakeChannel channel(rendezvous, rank);
      Controller controller(channel, ControllerOptions{});
      for (int c = 0; c < 8; ++c) {
        if (c == 3) controller.apply(params(0, 1, false));
        std::vector<Request> r;
        if (c % 2 == rank) r.push_back(allreduce_request("x", {4}));
        lists[rank].push_back(controller.compute_response_list(std::move(r), false));
      }
      cache_sizes[rank] = controller.cache().size();
      thresholds[rank] = controller.parameters().fusion_threshold_bytes;
    });
  }
  for (auto& t : threads) t.join();
  CHECK(cache_sizes == std::vector<std::size_t>{0, 0});
  CHECK(thresholds == std::vector<std::int64_t>{0, 0});
  for (int c = 0; c < 8; ++c) {
    INFO("cycle " << c);
    REQUIRE(lists[0][c].responses == lists[1][c].responses);
    CHECK(names_of(lists[0][c]).size() == (c % 2 == 1 ? 1u : 0u));
  }
}
