// The coordinator keeps one request per name in full and counts the others (Note [The
// coordinator's work is linear in ranks x tensors]): whatever the ranks send, in whatever
// batches, its answer must be the one a check of every request would give.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "core/codec.h"
#include "core/collective_traits.h"
#include "core/coordinator.h"
#include "core/request_checks.h"

using namespace hvd;
using namespace hvd::detail;

namespace {

std::vector<std::uint8_t> encoded(std::vector<Request> requests) {
  RequestList list;
  list.requests = std::move(requests);
  return encode(list);
}

// One rank's request for "t": mostly what every rank sends, sometimes differing in what ranks
// may differ in (device index, a gathered first dimension), sometimes in what they must agree on.
Request random_request(std::mt19937& rng, const Request& base, int rank) {
  Request r = base;
  r.rank = rank;
  auto chance = [&rng](int percent) { return static_cast<int>(rng() % 100) < percent; };
  if (base.device != kCpuDevice) r.device = rank % 4;  // each rank its own GPU
  if (traits_of(base.type).per_rank_first_dim && !r.shape.empty()) r.shape[0] = 1 + rng() % 5;
  r.waited_seconds = (rng() % 10) * 0.01;
  if (chance(4)) r.dtype = DataType::Float64;
  if (chance(4)) r.shape.push_back(2);
  if (chance(3) && !r.shape.empty()) r.shape.back() += 1;
  if (chance(2)) r.shape.clear();
  if (chance(3)) r.device = r.device == kCpuDevice ? 0 : kCpuDevice;
  if (chance(3)) r.reduce_op = ReduceOp::Max;
  if (chance(2)) r.prescale_factor = 0.5;
  if (chance(2)) r.postscale_factor = 2.0;
  if (chance(3)) r.root = 1;
  if (chance(2)) r.type = base.type == RequestType::Allreduce ? RequestType::Allgather : RequestType::Allreduce;
  return r;
}

}  // namespace

TEST_CASE("the coordinator answers a name as a check of all its requests would, over any batches", "[coordinator]") {
  std::mt19937 rng(20261126);
  const RequestType types[] = {RequestType::Allreduce, RequestType::Allgather, RequestType::Broadcast,
                               RequestType::Reducescatter};
  int errors = 0, answers = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const int size = 2 + static_cast<int>(rng() % 11);
    Request base;
    base.name = "t";
    base.type = types[rng() % 4];
    base.shape = {3, 4};
    base.device = rng() % 2 ? kCpuDevice : 0;
    base.reduce_op = ReduceOp::Sum;
    std::vector<Request> sent;  // what each rank sends first (a repeat in a later batch is ignored)
    for (int rank = 0; rank < size; ++rank) sent.push_back(random_request(rng, base, rank));
    // Each rank reports in one of up to three batches (every rank reports by the last).
    const int batches = 1 + static_cast<int>(rng() % 3);
    std::vector<int> batch_of(size);
    for (auto& b : batch_of) b = static_cast<int>(rng() % batches);
    batch_of[rng() % size] = batches - 1;
    const bool joins_possible = rng() % 2;
    INFO("trial " << trial << ", " << size << " ranks, " << batches << " batches, joins_possible " << joins_possible);

    Coordinator coordinator(size, StallOptions{}, nullptr);
    const Request* first = nullptr;
    ResponseList answer;
    for (int batch = 0; batch < batches; ++batch) {
      std::vector<std::vector<std::uint8_t>> gathered;
      for (int rank = 0; rank < size; ++rank) {
        std::vector<Request> list;
        if (batch_of[rank] == batch) {
          list.push_back(sent[rank]);
          if (first == nullptr) first = &sent[rank];
        } else if (batch_of[rank] < batch && rng() % 4 == 0) {
          list.push_back(random_request(rng, base, rank));  // a repeat: ignored
        }
        gathered.push_back(encoded(list));
      }
      ResponseList out = coordinator.coordinate(gathered, joins_possible);
      REQUIRE(out.shutdown_reason.empty());
      if (batch < batches - 1) {
        REQUIRE(out.responses.empty());
      } else {
        answer = out;
      }
    }
    REQUIRE(answer.responses.size() == 1);
    const Response& r = answer.responses[0];
    CHECK(r.names == std::vector<std::string>{"t"});
    const std::string expected_error = check_requests(sent, size, {});
    if (!expected_error.empty()) {
      ++errors;
      CHECK(r.type == ResponseType::Error);
      CHECK(r.error == expected_error);
      continue;
    }
    ++answers;
    CHECK(r.type == response_type_for(first->type));
    CHECK(r.shapes == std::vector<TensorShape>{first->shape});
    CHECK(r.dtype == first->dtype);
    CHECK(r.device == first->device);
    CHECK(r.reduce_op == first->reduce_op);
    CHECK(r.root == first->root);
    std::vector<std::int64_t> first_dims;
    if (traits_of(first->type).per_rank_first_dim)
      for (const auto& s : sent) first_dims.push_back(s.shape.front());
    CHECK(r.first_dims == first_dims);
  }
  // Both kinds of answer were exercised.
  CHECK(errors > 100);
  CHECK(answers > 100);
}

TEST_CASE("a corrupt list from any rank ends the cycle naming that rank, either way of reading", "[coordinator]") {
  for (bool joins_possible : {true, false}) {
    Coordinator coordinator(3, StallOptions{}, nullptr);
    Request r;
    r.name = "x";
    r.shape = {2};
    auto bad = encoded({r});
    bad.resize(bad.size() - 3);
    const ResponseList out = coordinator.coordinate({encoded({r}), encoded({r}), bad}, joins_possible);
    CHECK(out.responses.empty());
    CHECK_THAT(out.shutdown_reason, Catch::StartsWith("corrupt negotiation message from rank 2: truncated message"));
  }
}

TEST_CASE("a join read without a warning still counts for readiness", "[coordinator][join]") {
  Coordinator coordinator(2, StallOptions{}, nullptr);
  Request x;
  x.name = "x";
  x.shape = {2};
  Request join;
  join.type = RequestType::Join;
  join.name = kJoinTensorName;
  const ResponseList out = coordinator.coordinate({encoded({x}), encoded({join})}, /*joins_possible=*/false);
  REQUIRE(out.responses.size() == 1);
  CHECK(out.responses[0].names == std::vector<std::string>{"x"});
  CHECK(out.responses[0].type == ResponseType::Allreduce);
}

TEST_CASE("lists read one at a time as they arrive give the answers of the whole batch read at once", "[coordinator]") {
  std::mt19937 rng(20261127);
  const RequestType types[] = {RequestType::Allreduce, RequestType::Allgather, RequestType::Broadcast};
  int responses = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const int size = 1 + static_cast<int>(rng() % 9);
    INFO("trial " << trial << ", " << size << " ranks");
    Coordinator whole(size, StallOptions{}, nullptr), streamed(size, StallOptions{}, nullptr);
    // Names each rank submits in its own order, spread over batches.
    std::vector<Request> bases;
    for (int n = 0; n < 6; ++n) {
      Request base;
      base.name = "layer" + std::to_string(n) + ".weight";
      base.type = types[rng() % 3];
      base.shape = {3, 4};
      bases.push_back(base);
    }
    for (int batch = 0; batch < 3; ++batch) {
      std::vector<std::vector<std::uint8_t>> gathered;
      for (int rank = 0; rank < size; ++rank) {
        std::vector<Request> list;
        for (const auto& base : bases)
          if (static_cast<int>(rng() % 3) == batch || batch == 2) list.push_back(random_request(rng, base, rank));
        std::shuffle(list.begin(), list.end(), rng);
        gathered.push_back(encoded(list));
      }
      const ResponseList expected = whole.coordinate(gathered, /*joins_possible=*/false);
      streamed.start_batch();
      for (int rank = 0; rank < size; ++rank) streamed.read_list(rank, gathered[rank].data(), gathered[rank].size());
      const ResponseList got = streamed.finish_batch();
      REQUIRE(got.shutdown_reason == expected.shutdown_reason);
      REQUIRE(got.responses == expected.responses);
      responses += static_cast<int>(got.responses.size());
    }
  }
  CHECK(responses > 1000);
}

TEST_CASE("a batch read one list at a time fails on a list out of order, missing or corrupt, naming the rank",
          "[coordinator]") {
  Request r;
  r.name = "x";
  r.shape = {2};
  const auto good = encoded({r});
  Coordinator coordinator(4, StallOptions{}, nullptr);
  SECTION("out of order") {
    coordinator.start_batch();
    coordinator.read_list(0, good.data(), good.size());
    coordinator.read_list(2, good.data(), good.size());
    const ResponseList out = coordinator.finish_batch();
    CHECK(out.responses.empty());
    CHECK(out.shutdown_reason == "the coordinator received rank 2's request list out of order (expected rank 1's)");
  }
  SECTION("missing") {
    coordinator.start_batch();
    for (int rank = 0; rank < 3; ++rank) coordinator.read_list(rank, good.data(), good.size());
    const ResponseList out = coordinator.finish_batch();
    CHECK(out.responses.empty());
    CHECK(out.shutdown_reason == "the coordinator received 3 request lists for 4 ranks");
  }
  SECTION("corrupt, with good lists after it") {
    auto bad = good;
    bad.resize(bad.size() - 2);
    coordinator.start_batch();
    coordinator.read_list(0, good.data(), good.size());
    coordinator.read_list(1, bad.data(), bad.size());
    coordinator.read_list(2, good.data(), good.size());
    coordinator.read_list(3, good.data(), good.size());
    const ResponseList out = coordinator.finish_batch();
    CHECK(out.responses.empty());
    CHECK_THAT(out.shutdown_reason, Catch::StartsWith("corrupt negotiation message from rank 1: truncated message"));
  }
}
