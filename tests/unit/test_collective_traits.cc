// The collective traits table and what reads it: names, fusion of allgather and reducescatter
// (per-tensor first dimensions, the threshold counting gathered bytes), and request checks.
#include <catch2/catch.hpp>

#include "core/collective_traits.h"
#include "core/fusion.h"
#include "core/request_checks.h"

using namespace hvd;
using namespace hvd::detail;

namespace {

Response allgather(const std::string& name, TensorShape shape, std::vector<std::int64_t> first_dims) {
  Response r;
  r.type = ResponseType::Allgather;
  r.names = {name};
  r.shapes = {std::move(shape)};
  r.first_dims = std::move(first_dims);
  return r;
}

Response reducescatter(const std::string& name, TensorShape shape, ReduceOp op = ReduceOp::Sum) {
  Response r;
  r.type = ResponseType::Reducescatter;
  r.names = {name};
  r.shapes = {std::move(shape)};
  r.reduce_op = op;
  return r;
}

}  // namespace

TEST_CASE("every collective has its entry, in enum order, with the names messages use", "[traits]") {
  for (auto type : {RequestType::Allreduce, RequestType::Allgather, RequestType::Broadcast, RequestType::Alltoall,
                    RequestType::Reducescatter, RequestType::Join, RequestType::Barrier}) {
    const CollectiveTraits& t = traits_of(type);
    CHECK(t.request == type);
    CHECK(find_traits(t.response) == &t);
    CHECK(std::string(request_type_name(type)) == t.name);
    CHECK(std::string(response_type_name(t.response)) == t.name);
  }
  CHECK(find_traits(ResponseType::Error) == nullptr);
  CHECK(std::string(response_type_name(ResponseType::Error)) == "ERROR");
  CHECK(last_request_type() == RequestType::Barrier);
  CHECK(traits_of(RequestType::Allreduce).joinable);
  CHECK_FALSE(traits_of(RequestType::Allgather).joinable);
  CHECK(traits_of(RequestType::Allgather).fusable);
  CHECK(traits_of(RequestType::Reducescatter).fusable);
  CHECK_FALSE(traits_of(RequestType::Alltoall).fusable);
  CHECK_FALSE(traits_of(RequestType::Broadcast).fusable);
  CHECK(traits_of(RequestType::Broadcast).needs_root);
  CHECK_FALSE(traits_of(RequestType::Barrier).cacheable);
}

TEST_CASE("allgathers fuse, concatenating each tensor's per-rank first dimensions", "[traits][fusion]") {
  // float32 rows of 2: tensor a gathers 1 + 3 rows (32 bytes), b gathers 2 + 2 rows (32 bytes).
  std::vector<Response> in = {allgather("a", {1, 2}, {1, 3}), allgather("b", {2, 2}, {2, 2}),
                              allgather("c", {5, 2}, {5, 5})};
  auto fused = fuse_responses(in, 64);
  REQUIRE(fused.size() == 2);
  CHECK(fused[0].names == std::vector<std::string>{"a", "b"});
  CHECK(fused[0].first_dims == std::vector<std::int64_t>{1, 3, 2, 2});
  CHECK(fused[0].shapes.size() == 2);
  CHECK(fused[1].names == std::vector<std::string>{"c"});
  CHECK(fuse_responses(in, 0).size() == 3);
  // Gathered bytes count, not one rank's tensor: 1-row inputs that gather 40 rows do not fit 64 bytes.
  auto wide = fuse_responses({allgather("x", {1, 2}, {1, 39}), allgather("y", {1, 2}, {1, 1})}, 64);
  CHECK(wide.size() == 2);
}

TEST_CASE("reducescatters fuse only with the same op, dtype and scale factors", "[traits][fusion]") {
  std::vector<Response> in = {reducescatter("a", {4, 2}), reducescatter("b", {3}), reducescatter("c", {4}, ReduceOp::Max),
                              reducescatter("d", {2})};
  in[3].prescale_factor = 2.0;
  auto fused = fuse_responses(in, 1 << 20);
  REQUIRE(fused.size() == 3);
  CHECK(fused[0].names == std::vector<std::string>{"a", "b"});
  CHECK(fused[1].names == std::vector<std::string>{"c"});
  CHECK(fused[2].names == std::vector<std::string>{"d"});
}

TEST_CASE("responses of different collectives, and alltoalls, never fuse", "[traits][fusion]") {
  Response alltoall = allgather("t1", {2}, {2, 2});
  alltoall.type = ResponseType::Alltoall;
  Response alltoall2 = alltoall;
  alltoall2.names = {"t2"};
  auto fused = fuse_responses({allgather("g", {2}, {2, 2}), reducescatter("r", {2}), alltoall, alltoall2}, 1 << 20);
  CHECK(fused.size() == 4);
}

TEST_CASE("request checks read the table: reduce ops for reducescatter, first dims for allgather", "[traits][errors]") {
  Request a, b;
  a.type = b.type = RequestType::Reducescatter;
  a.name = b.name = "rs";
  a.shape = b.shape = {4};
  b.rank = 1;
  b.reduce_op = ReduceOp::Max;
  CHECK_THAT(check_requests({a, b}, 2, {}), Catch::Contains("reduce ops") && Catch::Contains("'rs'") &&
                                                Catch::Contains("REDUCESCATTER"));
  b.reduce_op = a.reduce_op;
  a.shape = b.shape = {};
  CHECK_THAT(check_requests({a, b}, 2, {}), Catch::Contains("needs at least one dimension"));
  a.type = b.type = RequestType::Allgather;
  a.shape = {1, 3};
  b.shape = {4, 3};
  b.reduce_op = ReduceOp::Max;  // allgather does not reduce: the op is not compared
  CHECK(check_requests({a, b}, 2, {}).empty());
  CHECK_THAT(check_requests({a, b}, 2, {1}), Catch::Contains("joined"));
}
