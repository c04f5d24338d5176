// Process sets at np=4: sets given at init ({0,1}, {2,3}, {0,1,2}, {1,2,3}, {3}), collectives in
// them against closed forms, sets running at the same time, errors (each followed by a working
// op), and add/remove at run time. Own main(): hvd::init() with the sets. The [dynamic] cases
// need HOROVOD_DYNAMIC_PROCESS_SETS=1; [static] checks that add/remove are refused without it.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include <horovodcpp/horovod.h>

#include "process_set_forms.h"
#include "test_support.h"

namespace {

using hvd::DataType;
using hvd::HostTensor;
using hvd::ProcessSet;
using hvd::test::filled;
using hvd::test::read_as_double;
using hvd::test::ramp;
using hvd::test::member_sum;
using hvd::test::is_member;

ProcessSet g_low({0, 1}), g_high({2, 3}), g_first3({0, 1, 2}), g_last3({3, 2, 1}), g_alone({3});

int me() { return hvd::rank(); }




// The error message of `f`, or "" when it did not throw hvd::Error.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const hvd::Error& e) {
    return e.what();
  }
  return "";
}

// A global allreduce that must work (after each error).
void check_global_allreduce_works(const std::string& name) {
  auto t = ramp(DataType::Float32, {5});
  hvd::AllreduceOptions o;
  o.op = hvd::ReduceOp::Sum;
  o.name = name;
  hvd::allreduce_async(t, t, o).wait();
  for (int i = 0; i < 5; ++i) REQUIRE(read_as_double(*t, i) == Approx(member_sum({0, 1, 2, 3}, i)));
}

}  // namespace

TEST_CASE("sets given at init have ids, ranks and this rank's index", "[static][dynamic]") {
  REQUIRE(hvd::size() == 4);
  CHECK(g_low.id() == 1);
  CHECK(g_high.id() == 2);
  CHECK(g_last3.id() == 4);
  CHECK(g_alone.id() == 5);
  CHECK(g_last3.ranks() == std::vector<int>{1, 2, 3});
  CHECK(g_last3.size() == 3);
  CHECK(hvd::global_process_set().id() == 0);
  CHECK(hvd::global_process_set().size() == 4);
  CHECK(hvd::global_process_set().rank() == me());
  CHECK(g_high.included() == (me() >= 2));
  if (me() >= 1) CHECK(g_last3.rank() == me() - 1);
  if (me() < 2) {
    const std::string e = error_of([] { g_high.rank(); });
    CHECK(e.find("rank " + std::to_string(me()) + " is not in process set 2 (ranks [2, 3])") != std::string::npos);
  }
}

TEST_CASE("disjoint sets run different collectives at the same time", "[static][dynamic]") {
  for (int round = 0; round < 3; ++round) {  // the second and third rounds use the response cache
    if (me() < 2) {
      auto t = ramp(DataType::Float64, {64});
      hvd::AllreduceOptions o;
      o.op = hvd::ReduceOp::Sum;
      o.name = "disjoint.x";
      o.process_set = g_low;
      hvd::allreduce_async(t, t, o).wait();
      for (int i = 0; i < 64; ++i) REQUIRE(read_as_double(*t, i) == Approx(member_sum({0, 1}, i)));
    } else {
      // The same name in another set is another tensor.
      auto t = filled(DataType::Int32, {me() - 1, 3}, [](std::int64_t i) { return me() * 100 + i; });
      hvd::AllgatherOptions o;
      o.name = "disjoint.x";
      o.process_set = g_high;
      auto h = hvd::allgather_async(t, hvd::host_allocator(), o);
      h.wait();
      auto& out = static_cast<HostTensor&>(*h.outputs().front());
      REQUIRE(out.shape() == hvd::TensorShape{3, 3});  // 1 row from rank 2, 2 from rank 3
      for (int i = 0; i < 3; ++i) REQUIRE(read_as_double(out, i) == 200 + i);
      for (int i = 0; i < 6; ++i) REQUIRE(read_as_double(out, 3 + i) == 300 + i);
    }
  }
  check_global_allreduce_works("disjoint.after");
}

TEST_CASE("overlapping sets run at the same time on the ranks they share", "[static][dynamic]") {
  std::vector<hvd::Handle> handles;
  std::vector<std::shared_ptr<HostTensor>> first, last;
  for (int k = 0; k < 4; ++k) {
    hvd::AllreduceOptions o;
    o.op = hvd::ReduceOp::Sum;
    o.name = "overlap." + std::to_string(k);
    if (is_member({0, 1, 2})) {
      first.push_back(ramp(DataType::Float32, {16}, k));
      o.process_set = g_first3;
      handles.push_back(hvd::allreduce_async(first.back(), first.back(), o));
    }
    if (is_member({1, 2, 3})) {
      last.push_back(ramp(DataType::Float32, {16}, 10 * k));
      o.process_set = g_last3;
      handles.push_back(hvd::allreduce_async(last.back(), last.back(), o));
    }
  }
  for (auto& h : handles) h.wait();
  for (std::size_t k = 0; k < first.size(); ++k)
    for (int i = 0; i < 16; ++i) REQUIRE(read_as_double(*first[k], i) == Approx(member_sum({0, 1, 2}, i, k)));
  for (std::size_t k = 0; k < last.size(); ++k)
    for (int i = 0; i < 16; ++i) REQUIRE(read_as_double(*last[k], i) == Approx(member_sum({1, 2, 3}, i, 10.0 * k)));
}

TEST_CASE("a set of one rank", "[static][dynamic]") {
  if (me() == 3) {
    auto t = ramp(DataType::Float32, {8});
    hvd::AllreduceOptions o;
    o.name = "alone";
    o.process_set = g_alone;  // Average over one rank
    hvd::allreduce_async(t, t, o).wait();
    for (int i = 0; i < 8; ++i) REQUIRE(read_as_double(*t, i) == Approx(4.0 * i));
    hvd::BroadcastOptions b;
    b.root = 3;  // a global rank of the set
    b.name = "alone.b";
    b.process_set = g_alone;
    hvd::broadcast_async(t, t, b).wait();
    hvd::barrier(g_alone);
    CHECK(hvd::join(g_alone) == 3);
  }
  check_global_allreduce_works("alone.after");
}

TEST_CASE("every collective and dtype in a set of three", "[static][dynamic]") {
  if (!is_member({1, 2, 3})) {
    check_global_allreduce_works("every.after");
    return;
  }
  const std::vector<int> members = {1, 2, 3};
  const int set_rank = me() - 1;
  for (DataType dtype : {DataType::UInt8, DataType::Int8, DataType::Int32, DataType::Int64, DataType::Float16,
                         DataType::BFloat16, DataType::Float32, DataType::Float64}) {
    const std::string d = hvd::dtype_name(dtype);
    INFO(d);
    // allreduce, Sum, values small enough for every dtype
    auto t = filled(dtype, {6}, [](std::int64_t i) { return me() + i; });
    hvd::AllreduceOptions ar;
    ar.op = hvd::ReduceOp::Sum;
    ar.name = "every.allreduce." + d;
    ar.process_set = g_last3;
    hvd::allreduce_async(t, t, ar).wait();
    for (int i = 0; i < 6; ++i) REQUIRE(read_as_double(*t, i) == Approx(6 + 3 * i));
    // broadcast from global rank 2 (the set's rank 1): roots are global ranks, as in Horovod
    auto b = filled(dtype, {4}, [](std::int64_t i) { return me() * 10 + i; });
    hvd::BroadcastOptions bo;
    bo.root = 2;
    bo.name = "every.broadcast." + d;
    bo.process_set = g_last3;
    hvd::broadcast_async(b, b, bo).wait();
    for (int i = 0; i < 4; ++i) REQUIRE(read_as_double(*b, i) == 20 + i);
    // allgather with a first dimension per rank: set rank k sends k+1 rows of 2
    auto g = filled(dtype, {set_rank + 1, 2}, [](std::int64_t i) { return me() * 10 + i; });
    hvd::AllgatherOptions go;
    go.name = "every.allgather." + d;
    go.process_set = g_last3;
    auto gh = hvd::allgather_async(g, hvd::host_allocator(), go);
    gh.wait();
    auto& gout = static_cast<HostTensor&>(*gh.outputs().front());
    REQUIRE(gout.shape() == hvd::TensorShape{6, 2});
    std::int64_t at = 0;
    for (int k = 0; k < 3; ++k)
      for (int i = 0; i < 2 * (k + 1); ++i) REQUIRE(read_as_double(gout, at++) == members[k] * 10 + i);
    // alltoall: to set rank k, k+1 rows of one element valued 10 * me + k
    std::vector<std::int64_t> splits = {1, 2, 3};
    auto a = HostTensor::allocate(dtype, {6});
    std::int64_t pos = 0;
    for (int k = 0; k < 3; ++k)
      for (int j = 0; j < k + 1; ++j) hvd::test::write_from_double(*a, pos++, me() * 10 + k);
    hvd::AlltoallOptions ao;
    ao.splits = splits;
    ao.name = "every.alltoall." + d;
    ao.process_set = g_last3;
    auto ah = hvd::alltoall_async(a, hvd::host_allocator(), ao);
    ah.wait();
    auto& aout = static_cast<HostTensor&>(*ah.outputs().front());
    REQUIRE(aout.shape() == hvd::TensorShape{3 * (set_rank + 1)});
    CHECK(ah.received_splits() == std::vector<std::int64_t>(3, set_rank + 1));
    for (int k = 0; k < 3; ++k)
      for (int j = 0; j <= set_rank; ++j)
        REQUIRE(read_as_double(aout, k * (set_rank + 1) + j) == members[k] * 10 + set_rank);
    // reducescatter: 3 rows, one per set rank
    auto rs = filled(dtype, {3, 2}, [](std::int64_t i) { return me() + i; });
    hvd::ReducescatterOptions ro;
    ro.op = hvd::ReduceOp::Sum;
    ro.name = "every.reducescatter." + d;
    ro.process_set = g_last3;
    auto rh = hvd::reducescatter_async(rs, hvd::host_allocator(), ro);
    rh.wait();
    auto& rout = static_cast<HostTensor&>(*rh.outputs().front());
    REQUIRE(rout.shape() == hvd::TensorShape{1, 2});
    for (int j = 0; j < 2; ++j) REQUIRE(read_as_double(rout, j) == Approx(6 + 3 * (2 * set_rank + j)));
  }
  // grouped allreduce, Average over the set
  auto x = ramp(DataType::Float32, {3}), y = ramp(DataType::Float32, {5});
  hvd::AllreduceOptions go;
  go.name = "every.grouped";
  go.process_set = g_last3;
  hvd::grouped_allreduce_async({x, y}, {x, y}, go).wait();
  for (int i = 0; i < 5; ++i) REQUIRE(read_as_double(*y, i) == Approx(member_sum(members, i) / 3));
  hvd::barrier(g_last3);
  check_global_allreduce_works("every.after");
}

TEST_CASE("join in a set waits for the set's ranks only", "[static][dynamic]") {
  if (is_member({2, 3})) {
    // Rank 3 has one more step than rank 2: rank 2 joins and contributes zeros.
    const int steps = me() == 3 ? 2 : 1;
    for (int s = 0; s < steps; ++s) {
      auto t = ramp(DataType::Float32, {4});
      hvd::AllreduceOptions o;
      o.op = hvd::ReduceOp::Sum;
      o.name = "join.step" + std::to_string(s);
      o.process_set = g_high;
      hvd::allreduce_async(t, t, o).wait();
      const double expected_factor = s == 0 ? 3 + 4 : 4;
      for (int i = 0; i < 4; ++i) REQUIRE(read_as_double(*t, i) == Approx(expected_factor * i));
    }
    CHECK(hvd::join(g_high) == 3);  // the global rank that joined last
  }
  check_global_allreduce_works("join.after");
}

TEST_CASE("a rank outside a set cannot submit to it", "[static][dynamic]") {
  if (me() >= 2) {
    auto t = ramp(DataType::Float32, {4});
    hvd::AllreduceOptions o;
    o.name = "outside.x";
    o.process_set = g_low;
    const std::string e = error_of([&] { hvd::allreduce_async(t, t, o); });
    CHECK(e.find("allreduce of 'outside.x'") != std::string::npos);
    CHECK(e.find("rank " + std::to_string(me()) + " is not in process set 1 (ranks [0, 1])") != std::string::npos);
    CHECK(error_of([&] { hvd::barrier(g_low); }).find("is not in process set 1") != std::string::npos);
  }
  check_global_allreduce_works("outside.after");
}

TEST_CASE("a mismatch inside a set names the set and the global ranks", "[static][dynamic]") {
  if (is_member({2, 3})) {
    auto t = ramp(DataType::Float32, {me() == 2 ? 4 : 5});
    hvd::AllreduceOptions o;
    o.name = "mismatch.x";
    o.process_set = g_high;
    const std::string e = error_of([&] { hvd::allreduce_async(t, t, o).wait(); });
    INFO(e);
    CHECK(e.find("Mismatched shapes for tensor 'mismatch.x'") != std::string::npos);
    CHECK(e.find("rank 2 has [4], rank 3 has [5]") != std::string::npos);
    CHECK(e.find("process set 2 (ranks [2, 3])") != std::string::npos);
    // The set still works.
    auto u = ramp(DataType::Float32, {4});
    o.name = "mismatch.after";
    o.op = hvd::ReduceOp::Sum;
    hvd::allreduce_async(u, u, o).wait();
    for (int i = 0; i < 4; ++i) REQUIRE(read_as_double(*u, i) == Approx(member_sum({2, 3}, i)));
  }
  check_global_allreduce_works("mismatch.global");
}

TEST_CASE("a broadcast root outside the set is refused", "[static][dynamic]") {
  if (is_member({0, 1})) {
    auto t = ramp(DataType::Float32, {2});
    hvd::BroadcastOptions b;
    b.root = 2;
    b.name = "root.x";
    b.process_set = g_low;
    const std::string e = error_of([&] { hvd::broadcast_async(t, t, b); });
    CHECK(e.find("root rank 2 is not in process set 1 (ranks [0, 1])") != std::string::npos);
  }
}

TEST_CASE("an unregistered set is refused", "[static][dynamic]") {
  ProcessSet loose({0, 1, 2, 3});
  auto t = ramp(DataType::Float32, {2});
  hvd::AllreduceOptions o;
  o.name = "loose.x";
  o.process_set = loose;
  const std::string e = error_of([&] { hvd::allreduce_async(t, t, o); });
  CHECK(e.find("unregistered process set (ranks [0, 1, 2, 3]) cannot be used") != std::string::npos);
  check_global_allreduce_works("loose.after");
}

TEST_CASE("add and remove are refused without HOROVOD_DYNAMIC_PROCESS_SETS", "[static]") {
  CHECK(error_of([] { hvd::add_process_set({0, 3}); }).find("needs HOROVOD_DYNAMIC_PROCESS_SETS=1") != std::string::npos);
  CHECK(error_of([] { hvd::remove_process_set(g_low); }).find("needs HOROVOD_DYNAMIC_PROCESS_SETS=1") !=
        std::string::npos);
  check_global_allreduce_works("static.after");
}

TEST_CASE("sets added at run time work and can be removed", "[dynamic]") {
  ProcessSet ends = hvd::add_process_set({3, 0});
  REQUIRE(ends.id() == 6);
  CHECK(ends.ranks() == std::vector<int>{0, 3});
  if (ends.included()) {
    auto t = ramp(DataType::Float32, {8});
    hvd::AllreduceOptions o;
    o.op = hvd::ReduceOp::Sum;
    o.name = "added.x";
    o.process_set = ends;
    hvd::allreduce_async(t, t, o).wait();
    for (int i = 0; i < 8; ++i) REQUIRE(read_as_double(*t, i) == Approx(member_sum({0, 3}, i)));
  }
  hvd::remove_process_set(ends);
  CHECK(ends.id() == -1);
  auto t = ramp(DataType::Float32, {2});
  hvd::AllreduceOptions o;
  o.name = "removed.x";
  o.process_set = ends;
  CHECK(error_of([&] { hvd::allreduce_async(t, t, o); }).find("removed process set (ranks [3, 0]) cannot be used") !=
        std::string::npos);
  // Ids are not reused.
  ProcessSet again = hvd::add_process_set({0, 3});
  CHECK(again.id() == 7);
  hvd::remove_process_set(again);
  check_global_allreduce_works("added.after");
}

TEST_CASE("adding a set with bad ranks fails on every rank", "[dynamic]") {
  CHECK(error_of([] { hvd::add_process_set({0, 4}); }).find("rank 4 is out of range [0, 4)") != std::string::npos);
  CHECK(error_of([] { hvd::add_process_set({1, 2, 1}); }).find("rank 1 is repeated") != std::string::npos);
  CHECK(error_of([] { hvd::add_process_set({1, 0}); }).find("process set 1 (ranks [0, 1]) already has these ranks") !=
        std::string::npos);
  CHECK(error_of([] { hvd::add_process_set(std::vector<int>{}); }).find("needs at least one rank") != std::string::npos);
  CHECK(error_of([] { hvd::remove_process_set(hvd::global_process_set()); }).find("cannot be removed") !=
        std::string::npos);
  check_global_allreduce_works("badranks.after");
}

TEST_CASE("removing a set with operations in flight is refused on every rank", "[dynamic]") {
  ProcessSet pair = hvd::add_process_set({1, 3});
  auto t = ramp(DataType::Float32, {4});
  hvd::AllreduceOptions o;
  o.op = hvd::ReduceOp::Sum;
  o.name = "inflight.x";
  o.process_set = pair;
  hvd::Handle h;
  if (me() == 1) h = hvd::allreduce_async(t, t, o);  // rank 3 has not submitted yet
  const std::string e = error_of([&] { hvd::remove_process_set(pair); });
  INFO(e);
  CHECK(e.find("process set " + std::to_string(pair.id()) + " (ranks [1, 3]) still has operations in flight on rank 1") !=
        std::string::npos);
  CHECK(pair.id() >= 0);
  if (me() == 3) h = hvd::allreduce_async(t, t, o);
  if (h.valid()) {
    h.wait();
    for (int i = 0; i < 4; ++i) REQUIRE(read_as_double(*t, i) == Approx(member_sum({1, 3}, i)));
  }
  hvd::remove_process_set(pair);
  CHECK(pair.id() == -1);
  check_global_allreduce_works("inflight.after");
}

TEST_CASE("ranks that add different sets get a mismatch on every rank", "[dynamic]") {
  const std::vector<int> ranks = me() == 0 ? std::vector<int>{0, 2} : std::vector<int>{1, 2};
  const std::string e = error_of([&] { hvd::add_process_set(ranks); });
  INFO(e);
  CHECK(e.find("Mismatched shapes") != std::string::npos);
  CHECK(e.find("rank 0 has [0, 2], rank 1 has [1, 2]") != std::string::npos);
  check_global_allreduce_works("addmismatch.after");
}

int main(int argc, char** argv) {
  hvd::init({g_low, g_high, g_first3, g_last3, g_alone});
  std::fprintf(stderr, "rank %d of %d starting process set tests\n", hvd::rank(), hvd::size());
  Catch::Session session;
  const int failed = session.run(argc, argv);
  hvd::shutdown();
  return failed == 0 ? 0 : 1;
}
