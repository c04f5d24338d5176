// What the caller's thread checks of a submitted tensor and what its entry and request carry,
// for every collective, as its traits say (core/submission.h).
#include <catch2/catch.hpp>

#include "core/collective_traits.h"
#include "core/submission.h"

using namespace hvd;
using namespace hvd::detail;

namespace {

Submitted submission(TensorShape shape) {
  Submitted s;
  s.input = HostTensor::allocate(DataType::Float32, shape);
  s.output = HostTensor::allocate(DataType::Float32, shape);
  s.allocate_output = [](DataType dtype, const TensorShape& shape) { return HostTensor::allocate(dtype, shape); };
  s.reduction = {ReduceOp::Max, 0.5, 4.0};
  return s;
}

const RequestType kTensorCollectives[] = {RequestType::Allreduce, RequestType::Allgather, RequestType::Broadcast,
                                          RequestType::Alltoall, RequestType::Reducescatter};

}  // namespace

TEST_CASE("a scalar is refused exactly by the collectives that need a first dimension", "[submission]") {
  for (RequestType type : kTensorCollectives) {
    const CollectiveTraits& traits = traits_of(type);
    INFO(traits.name);
    if (traits.needs_first_dim) {
      CHECK_THROWS_WITH(checked_entry(type, "op", "s", submission({})),
                        std::string("op of 's': the input is a scalar; ") + traits.name + " needs a first dimension");
    } else {
      CHECK_NOTHROW(checked_entry(type, "op", "s", submission({})));
    }
  }
}

TEST_CASE("the caller's output is checked where the caller passes one, the allocator kept where the op allocates",
          "[submission]") {
  for (RequestType type : kTensorCollectives) {
    const CollectiveTraits& traits = traits_of(type);
    INFO(traits.name);
    Submitted wrong = submission({4});
    wrong.output = HostTensor::allocate(DataType::Float32, {5});
    if (traits.allocates_output) {
      const TensorTableEntry e = checked_entry(type, "op", "t", wrong);
      CHECK(static_cast<bool>(e.allocate_output));
    } else {
      CHECK_THROWS_WITH(checked_entry(type, "op", "t", wrong),
                        "op of 't': output float32[5] does not match input float32[4]");
      CHECK_FALSE(static_cast<bool>(checked_entry(type, "op", "t", submission({4})).allocate_output));
    }
  }
  CHECK_THROWS_WITH(checked_entry(RequestType::Allgather, "allgather", "n", Submitted{}),
                    "allgather of 'n': the input tensor is null");
  CHECK_NOTHROW(checked_entry(RequestType::Barrier, "hvd::barrier()", "b", Submitted{}));
}

TEST_CASE("the reduction reaches the entry and the request exactly for the collectives that reduce", "[submission]") {
  for (RequestType type : kTensorCollectives) {
    const CollectiveTraits& traits = traits_of(type);
    INFO(traits.name);
    const TensorTableEntry e = checked_entry(type, "op", "t", submission({4, 2}));
    const Request r = request_for(e);
    CHECK(r.type == type);
    CHECK(r.name == "t");
    CHECK(r.shape == TensorShape{4, 2});
    CHECK(r.dtype == DataType::Float32);
    const bool reduces = traits.reduces;
    CHECK((e.reduce_op == ReduceOp::Max) == reduces);
    CHECK((r.reduce_op == ReduceOp::Max) == reduces);
    CHECK(r.prescale_factor == (reduces ? 0.5 : 1.0));
    CHECK(r.postscale_factor == (reduces ? 4.0 : 1.0));
  }
}
