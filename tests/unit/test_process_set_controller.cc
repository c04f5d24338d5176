// A process set's negotiation over the in-process channel: its coordinator names global ranks
// and the set (mismatches, stalls, allgather's per-rank sizes), two sets negotiate side by side
// without seeing each other's tensors.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "controller_harness.h"
#include "core/codec.h"
#include "core/coordinator.h"
#include "core/process_set_table.h"

using namespace hvd;
using namespace hvd::detail;
using hvd::test::allreduce_request;
using hvd::test::names_of;
using hvd::test::run_controllers;

namespace {

ControllerOptions set_options(std::vector<int> global_ranks, int id) {
  ControllerOptions o;
  o.group = {global_ranks, describe_process_set(id, global_ranks)};
  return o;
}

std::vector<std::uint8_t> encoded(std::vector<Request> requests) {
  RequestList list;
  list.requests = std::move(requests);
  return encode(list);
}

}  // namespace

TEST_CASE("a mismatch in a set names the set and the global ranks", "[process_set]") {
  // Set ranks 0 and 1 are global ranks 2 and 3.
  auto run = run_controllers(
      2, 2,
      [](int rank, int cycle) {
        if (cycle != 0) return std::vector<Request>{};
        return std::vector<Request>{allreduce_request("x", {rank == 0 ? 4 : 5})};
      },
      set_options({2, 3}, 2));
  for (int rank = 0; rank < 2; ++rank) {
    const auto& responses = run.lists[rank][0].responses;
    REQUIRE(responses.size() == 1);
    CHECK(responses[0].type == ResponseType::Error);
    CHECK(responses[0].error ==
          "Mismatched shapes for tensor 'x' (ALLREDUCE): rank 2 has [4], rank 3 has [5] "
          "(in process set 2 (ranks [2, 3]))");
  }
}

TEST_CASE("two sets negotiate side by side and never mix their tensors", "[process_set]") {
  // Threads 0..3 are global ranks; sets {0,1} and {2,3} each get their own channel and
  // controller, and submit the same names at different times.
  std::vector<std::vector<ResponseList>> lists(4);
  auto low = std::make_shared<hvd::test::Rendezvous>(2), high = std::make_shared<hvd::test::Rendezvous>(2);
  std::vector<std::thread> threads;
  for (int global = 0; global < 4; ++global) {
    threads.emplace_back([&, global] {
      const bool in_low = global < 2;
      hvd::test::FakeChannel channel(in_low ? low : high, global % 2);
      Controller controller(channel, set_options(in_low ? std::vector<int>{0, 1} : std::vector<int>{2, 3}, in_low ? 1 : 2));
      for (int c = 0; c < 4; ++c) {
        std::vector<Request> requests;
        // {0,1} submit a and b in cycle 0; {2,3} submit only a, in cycle 2.
        if (in_low && c == 0) requests = {allreduce_request("a", {8}), allreduce_request("b", {8})};
        if (!in_low && c == 2) requests = {allreduce_request("a", {3})};
        lists[global].push_back(controller.compute_response_list(std::move(requests), false));
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int global = 0; global < 4; ++global) {
    INFO("global rank " << global);
    std::vector<std::string> seen;
    for (int c = 0; c < 4; ++c)
      for (const auto& n : names_of(lists[global][c])) seen.push_back(n + "@" + std::to_string(c));
    if (global < 2) {
      CHECK(seen == std::vector<std::string>{"a@0", "b@0"});
      // Fused within the set: one response for both.
      CHECK(lists[global][0].responses.size() == 1);
    } else {
      CHECK(seen == std::vector<std::string>{"a@2"});
      CHECK(lists[global][2].responses.at(0).shapes.at(0) == TensorShape{3});
    }
  }
}

TEST_CASE("the stall inspector names the missing global ranks of a set", "[process_set][stall]") {
  StallOptions stall;
  stall.warning_seconds = 0.01;
  stall.shutdown_seconds = 0.02;
  Coordinator coordinator(3, stall, nullptr, {{1, 3, 4}, describe_process_set(2, {1, 3, 4})});
  // Only set rank 1 (global rank 3) submits.
  auto first = coordinator.coordinate({encoded({}), encoded({allreduce_request("w", {2})}), encoded({})});
  CHECK(first.shutdown_reason.empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  auto later = coordinator.coordinate({encoded({}), encoded({}), encoded({})});
  INFO(later.shutdown_reason);
  CHECK(later.shutdown_reason.find("tensor 'w' in process set 2 (ranks [1, 3, 4]) was submitted by some ranks but "
                                   "not by ranks 1, 4") != std::string::npos);
}

TEST_CASE("allgather sizes in a set are indexed by the rank in the set", "[process_set]") {
  Coordinator coordinator(2, StallOptions{}, nullptr, {{1, 3}, describe_process_set(1, {1, 3})});
  Request mine;
  mine.type = RequestType::Allgather;
  mine.name = "g";
  mine.shape = {2, 5};
  Request theirs = mine;
  theirs.shape = {7, 5};
  auto list = coordinator.coordinate({encoded({mine}), encoded({theirs})});
  REQUIRE(list.responses.size() == 1);
  CHECK(list.responses[0].type == ResponseType::Allgather);
  CHECK(list.responses[0].first_dims == std::vector<std::int64_t>{2, 7});
}


TEST_CASE("new sets' ranks are checked", "[process_set]") {
  ProcessSetTable table;
  std::vector<int> sorted;
  CHECK(table.check_new_ranks({2, 0}, 4, &sorted).empty());
  CHECK(sorted == std::vector<int>{0, 2});
  CHECK(table.check_new_ranks({0, 5}, 4, &sorted) == "ranks [0, 5]: rank 5 is out of range [0, 4)");
  CHECK(table.check_new_ranks({-1}, 4, &sorted) == "ranks [-1]: rank -1 is out of range [0, 4)");
  CHECK(table.check_new_ranks({3, 1, 3}, 4, &sorted) == "ranks [3, 1, 3]: rank 3 is repeated");
  CHECK(table.check_new_ranks({}, 4, &sorted) == "a process set needs at least one rank (got ranks [])");
  {
    std::lock_guard<std::mutex> lock(table.mutex());
    table.add({0, 1, 2, 3});
    CHECK(table.add({1, 2}).id == 1);
  }
  CHECK(table.check_new_ranks({2, 1}, 4, &sorted) == "ranks [2, 1]: process set 1 (ranks [1, 2]) already has these ranks");
  std::lock_guard<std::mutex> lock(table.mutex());
  table.remove(1);
  CHECK(table.find(1) == nullptr);
  CHECK(table.was_removed(1));
  CHECK(table.add({1, 2}).id == 2);  // ids are not reused
}
