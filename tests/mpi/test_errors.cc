// Every error a user can reach: the message names what was wrong, every rank sees it, and the
// next operation still works.
#include <catch2/catch.hpp>

#include "expected_failure.h"
#include "test_support.h"

using namespace hvd;
using hvd::test::failure_of;
using hvd::test::filled;
using hvd::test::read_as_double;

namespace {

// The runtime still works after an error.
void require_next_operation_works(const std::string& name) {
  auto t = filled(DataType::Float32, {3}, [](std::int64_t i) { return i; });
  allreduce_async(t, t, {ReduceOp::Sum, name}).wait();
  CHECK(read_as_double(*t, 2) == 2.0 * hvd::size());
}

}  // namespace

TEST_CASE("mismatched dtypes fail on every rank, naming tensor, ranks and both dtypes", "[errors]") {
  const DataType dtype = hvd::rank() == 0 ? DataType::Float32 : DataType::Int32;
  auto t = HostTensor::allocate(dtype, {4});
  std::string message = failure_of(allreduce_async(t, t, {ReduceOp::Sum, "bad.dtype"}));
  CHECK_THAT(message, Catch::Contains("'bad.dtype'") && Catch::Contains("rank 0 has float32") &&
                          Catch::Contains("rank 1 has int32"));
  require_next_operation_works("after.dtype");
}

TEST_CASE("a mismatch message shows a huge tensor name cut short", "[errors]") {
  const std::string name = "huge." + std::string(1 << 20, 'n') + ".end";
  auto t = HostTensor::allocate(DataType::Float32, {hvd::rank() == 0 ? 3 : 5});
  std::string message = failure_of(allreduce_async(t, t, {ReduceOp::Sum, name}));
  CHECK_THAT(message, Catch::Contains("'huge.nnn") && Catch::Contains("...(1048585 characters)...") &&
                          Catch::Contains("nnn.end'") && Catch::Contains("[3]") && Catch::Contains("[5]"));
  CHECK(message.size() < 2000);
  require_next_operation_works("after.huge.name");
}

TEST_CASE("mismatched shapes fail on every rank with both shapes", "[errors]") {
  auto t = HostTensor::allocate(DataType::Float32, {2, hvd::rank() == 0 ? 3 : 5});
  std::string message = failure_of(allreduce_async(t, t, {ReduceOp::Sum, "bad.shape"}));
  CHECK_THAT(message, Catch::Contains("'bad.shape'") && Catch::Contains("[2, 3]") && Catch::Contains("[2, 5]"));
  require_next_operation_works("after.shape");
}

TEST_CASE("mismatched reduce ops, scale factors, roots and collectives", "[errors]") {
  const bool first = hvd::rank() == 0;
  auto t = HostTensor::allocate(DataType::Float32, {4});
  SECTION("reduce op") {
    auto m = failure_of(allreduce_async(t, t, {first ? ReduceOp::Sum : ReduceOp::Min, "bad.op"}));
    CHECK_THAT(m, Catch::Contains("reduce ops") && Catch::Contains("'bad.op'") && Catch::Contains("rank 0 has Sum") &&
                      Catch::Contains("rank 1 has Min"));
  }
  SECTION("prescale") {
    auto m = failure_of(allreduce_async(t, t, {ReduceOp::Sum, "bad.prescale", first ? 1.0 : 0.5}));
    CHECK_THAT(m, Catch::Contains("prescale factors") && Catch::Contains("'bad.prescale'") &&
                      Catch::Contains("rank 0 has 1,") && Catch::Contains("rank 1 has 0.5"));
  }
  SECTION("postscale") {
    auto m = failure_of(allreduce_async(t, t, {ReduceOp::Sum, "bad.postscale", 1.0, first ? 1.0 : 4.0}));
    CHECK_THAT(m, Catch::Contains("postscale factors") && Catch::Contains("'bad.postscale'") &&
                      Catch::Contains("rank 0 has 1,") && Catch::Contains("rank 1 has 4"));
  }
  SECTION("broadcast root") {
    auto m = failure_of(broadcast_async(t, t, {first ? 0 : 1, "bad.root"}));
    CHECK_THAT(m, Catch::Contains("'bad.root'") && Catch::Contains("root 0") && Catch::Contains("root 1"));
  }
  SECTION("collective") {
    Handle h = first ? allreduce_async(t, t, {ReduceOp::Sum, "bad.kind"})
                     : broadcast_async(t, t, {0, "bad.kind"});
    CHECK_THAT(failure_of(h), Catch::Contains("'bad.kind'") && Catch::Contains("rank 0 has ALLREDUCE") &&
                                  Catch::Contains("rank 1 has BROADCAST"));
  }
  SECTION("allgather trailing dimensions") {
    auto g = HostTensor::allocate(DataType::Float32, {2, first ? 3 : 4});
    auto m = failure_of(allgather_async(g, host_allocator(), {"bad.gather"}));
    CHECK_THAT(m, Catch::Contains("'bad.gather'") && Catch::Contains("first dimension") &&
                      Catch::Contains("rank 0 has [2, 3]") && Catch::Contains("rank 1 has [2, 4]"));
  }
  SECTION("grouped allreduce sizes") {
    const int members = first ? 2 : 3;
    std::vector<TensorPtr> ins;
    for (int k = 0; k < members; ++k) ins.push_back(HostTensor::allocate(DataType::Float32, {2}));
    auto m = failure_of(grouped_allreduce_async(ins, ins, {ReduceOp::Sum, "bad.group"}));
    CHECK_THAT(m, Catch::Contains("group sizes") && Catch::Contains("'bad.group'") &&
                      Catch::Contains("rank 0 submitted 2") && Catch::Contains("submitted 3"));
  }
  require_next_operation_works("after.mismatch");
}

TEST_CASE("the same name twice in flight is refused at once, on the rank that did it", "[errors]") {
  // Each rank in turn submits first, while the others wait in a barrier, so its tensor is
  // surely still in flight when it submits the same name again.
  for (int first_rank = 0; first_rank < hvd::size(); ++first_rank) {
    const std::string name = "twice." + std::to_string(first_rank);
    auto a = filled(DataType::Float32, {2}, [](std::int64_t) { return 1; });
    auto b = filled(DataType::Float32, {2}, [](std::int64_t) { return 1; });
    Handle first;
    if (hvd::rank() == first_rank) {
      first = allreduce_async(a, a, {ReduceOp::Sum, name});
      CHECK_THROWS_WITH(allreduce_async(b, b, {ReduceOp::Sum, name}),
                        Catch::Contains("'" + name + "'") && Catch::Contains("already in flight"));
      CHECK_THROWS_AS(allreduce_async(b, b, {ReduceOp::Sum, name}), InvalidArgument);
    }
    hvd::barrier();
    if (hvd::rank() != first_rank) first = allreduce_async(a, a, {ReduceOp::Sum, name});
    first.wait();
    CHECK(read_as_double(*a, 0) == hvd::size());
  }
}

TEST_CASE("bad arguments are rejected before anything is sent", "[errors]") {
  auto t = HostTensor::allocate(DataType::Float32, {4});
  const int size = hvd::size();
  CHECK_THROWS_WITH(broadcast_async(t, t, {size, "root.range"}),
                    Catch::Contains("'root.range'") && Catch::Contains("root rank " + std::to_string(size)) &&
                        Catch::Contains("out of range"));
  CHECK_THROWS_WITH(broadcast_async(t, t, {-1, "root.negative"}), Catch::Contains("out of range"));
  std::vector<std::int64_t> splits(size, 0);
  splits[0] = 3;  // sums to 3, not 4
  CHECK_THROWS_WITH(alltoall_async(t, host_allocator(), {splits, "split.sum"}),
                    Catch::Contains("'split.sum'") && Catch::Contains("sum to 3") && Catch::Contains("is 4"));
  CHECK_THROWS_WITH(alltoall_async(t, host_allocator(), {{1, 1, 1, 1, 1, 1, 1}, "split.count"}),
                    Catch::Contains("7 splits for " + std::to_string(size) + " ranks"));
  CHECK_THROWS_WITH(allreduce_async(nullptr, t, {ReduceOp::Sum, "null.input"}),
                    Catch::Contains("'null.input'") && Catch::Contains("null"));
  auto wrong = HostTensor::allocate(DataType::Float32, {5});
  CHECK_THROWS_WITH(allreduce_async(t, wrong, {ReduceOp::Sum, "out.shape"}),
                    Catch::Contains("'out.shape'") && Catch::Contains("[5]") && Catch::Contains("[4]"));
  CHECK_THROWS_WITH(allreduce_async(t, t, {ReduceOp::Sum, "__hvd_mine"}), Catch::Contains("reserved"));
  auto scalar = HostTensor::allocate(DataType::Float32, {});
  CHECK_THROWS_WITH(allgather_async(scalar, host_allocator(), {"scalar.gather"}), Catch::Contains("scalar"));
  CHECK_THROWS_WITH(grouped_allreduce_async({t}, {}, {ReduceOp::Sum, "group.count"}),
                    Catch::Contains("1 inputs but 0 outputs"));
  // Each is the caller's to fix: hvd::InvalidArgument (Python's ValueError), not a failed operation.
  CHECK_THROWS_AS(broadcast_async(t, t, {size, "root.kind"}), InvalidArgument);
  CHECK_THROWS_AS(alltoall_async(t, host_allocator(), {splits, "split.kind"}), InvalidArgument);
  CHECK_THROWS_AS(allgather_async(scalar, host_allocator(), {"scalar.kind"}), InvalidArgument);
  require_next_operation_works("after.arguments");
}

TEST_CASE("a mismatch found by negotiation is a failed operation, not an invalid argument", "[errors]") {
  auto t = HostTensor::allocate(DataType::Float32, {hvd::rank() == 0 ? 2 : 3});
  try {
    allreduce_async(t, t, {ReduceOp::Sum, "kind.shape"}).wait();
    FAIL("the mismatched allreduce succeeded");
  } catch (const InvalidArgument& e) {
    FAIL("a negotiation mismatch was reported as an invalid argument: " << e.what());
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("'kind.shape'"));
  }
  require_next_operation_works("after.kind");
}

// An output allocator that throws or returns the wrong tensor stops every rank (see Note [An
// exception in the executor stops every rank] in core/executor.h): hvd_fault_allocator_np*.

TEST_CASE("a mismatch inside a grouped allgather or reducescatter fails the group on every rank", "[errors][grouped]") {
  const bool first = hvd::rank() == 0;
  SECTION("grouped allgather trailing dimensions") {
    std::vector<TensorPtr> ins = {HostTensor::allocate(DataType::Float32, {2, 3}),
                                  HostTensor::allocate(DataType::Float32, {1, first ? 4 : 5})};
    auto m = failure_of(grouped_allgather_async(ins, host_allocator(), {"bad.gag"}));
    CHECK_THAT(m, Catch::Contains("'bad.gag.1'") && Catch::Contains("ALLGATHER") &&
                      Catch::Contains("rank 0 has [1, 4]") && Catch::Contains("rank 1 has [1, 5]"));
  }
  SECTION("grouped reducescatter shapes") {
    std::vector<TensorPtr> ins = {HostTensor::allocate(DataType::Float32, {first ? 4 : 6, 2}),
                                  HostTensor::allocate(DataType::Float32, {4})};
    auto m = failure_of(grouped_reducescatter_async(ins, host_allocator(), {ReduceOp::Sum, "bad.grs"}));
    CHECK_THAT(m, Catch::Contains("'bad.grs.0'") && Catch::Contains("REDUCESCATTER") &&
                      Catch::Contains("rank 0 has [4, 2]") && Catch::Contains("rank 1 has [6, 2]"));
  }
  SECTION("grouped reducescatter reduce ops") {
    std::vector<TensorPtr> ins = {HostTensor::allocate(DataType::Float32, {4})};
    auto m = failure_of(grouped_reducescatter_async(ins, host_allocator(), {first ? ReduceOp::Sum : ReduceOp::Max, "bad.grsop"}));
    CHECK_THAT(m, Catch::Contains("'bad.grsop.0'") && Catch::Contains("reduce ops") &&
                      Catch::Contains("rank 0 has Sum") && Catch::Contains("rank 1 has Max"));
  }
  SECTION("grouped allgather sizes") {
    std::vector<TensorPtr> ins;
    for (int k = 0; k < (first ? 1 : 2); ++k) ins.push_back(HostTensor::allocate(DataType::Float32, {2}));
    auto m = failure_of(grouped_allgather_async(ins, host_allocator(), {"bad.gagsize"}));
    CHECK_THAT(m, Catch::Contains("group sizes") && Catch::Contains("grouped ALLGATHER") &&
                      Catch::Contains("'bad.gagsize'") && Catch::Contains("rank 0 submitted 1") &&
                      Catch::Contains("submitted 2"));
  }
  require_next_operation_works("after.grouped");
}

// See Note [A collective one rank cannot run fails on every rank] (core/api.cc).
TEST_CASE("a collective refused on one rank before submission fails on every rank, naming it", "[errors][withdraw]") {
  const int size = hvd::size(), last = size - 1;
  const bool odd = hvd::rank() == last;
  auto t = filled(DataType::Float32, {2 * size}, [](std::int64_t i) { return i; });
  // Alltoall splits that do not add up on the last rank only: it throws at once; the others'
  // handles fail with its reason instead of waiting for it.
  std::vector<std::int64_t> splits(size, 2);
  if (odd) splits[0] = 3;
  const std::string reason = "alltoall of 'withdrawn.alltoall': splits sum to " + std::to_string(2 * size + 1);
  if (odd) {
    CHECK_THROWS_WITH(alltoall_async(t, host_allocator(), {splits, "withdrawn.alltoall"}), Catch::Contains(reason));
  } else {
    CHECK_THAT(failure_of(alltoall_async(t, host_allocator(), {splits, "withdrawn.alltoall"})),
               Catch::Contains("ALLTOALL of 'withdrawn.alltoall' cannot run: rank " + std::to_string(last) +
                               " did not submit it (" + reason));
  }
  require_next_operation_works("after.withdrawn.alltoall");
  // The same for a broadcast root out of range on one rank, and for a name withdrawn by hand.
  if (odd) {
    CHECK_THROWS_WITH(broadcast_async(t, t, {size, "withdrawn.broadcast"}), Catch::Contains("out of range"));
  } else {
    CHECK_THAT(failure_of(broadcast_async(t, t, {0, "withdrawn.broadcast"})),
               Catch::Contains("rank " + std::to_string(last) + " did not submit it") && Catch::Contains("out of range"));
  }
  if (odd) {
    CHECK_THAT(failure_of(hvd::withdraw("withdrawn.by_hand", "no data here")),
               Catch::Contains("rank " + std::to_string(last) + " did not submit it (no data here)"));
  } else {
    CHECK_THAT(failure_of(allreduce_async(t, t, {ReduceOp::Sum, "withdrawn.by_hand"})),
               Catch::Contains("ALLREDUCE of 'withdrawn.by_hand' cannot run: rank " + std::to_string(last) +
                               " did not submit it (no data here)"));
  }
  CHECK_THROWS_WITH(hvd::withdraw("", "x"), Catch::Contains("the collective's name is empty"));
  require_next_operation_works("after.withdrawn.all");
}
