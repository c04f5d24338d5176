// GPU tests of process sets on the NCCL backend (np=2 and np=4; HOROVOD_DYNAMIC_PROCESS_SETS=1):
// every rank alone in a set of one while the global set runs, and, from np=3, a set of the first
// and last ranks added at run time in which every collective (alltoall's splits go through the
// set's control channel) is checked against a closed form while the ranks between them reduce
// in a set of their own. Skips (code 77) without a CUDA device, as the other GPU tests do.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>


#include "tests/common/every_rank_session.h"
#include "tests/gpu/gpu_test_util.h"

using namespace hvd;
using hvd::test::DeviceTensor;

namespace {

test::DeviceTensorPtr device_ramp(DataType dtype, std::int64_t n, double factor) {
  std::vector<double> values(n);
  for (std::int64_t i = 0; i < n; ++i) values[i] = factor * i;
  auto t = DeviceTensor::allocate(dtype, {n});
  t->upload(values);
  return t;
}

}  // namespace

TEST_CASE("a set of one rank runs beside the global set on the GPU") {
  // Every rank adds every singleton set, in the same order (adding is collective).
  std::vector<ProcessSet> singles;
  for (int r = 0; r < size(); ++r) singles.push_back(add_process_set({r}));
  auto alone = device_ramp(DataType::Float32, 64, rank() + 1);
  auto everyone = device_ramp(DataType::Float32, 64, rank() + 1);
  AllreduceOptions a{ReduceOp::Sum, "gpu.alone"};
  a.process_set = singles[static_cast<std::size_t>(rank())];
  AllreduceOptions g{ReduceOp::Sum, "gpu.everyone"};
  Handle h1 = allreduce_async(alone, alone, a);
  Handle h2 = allreduce_async(everyone, everyone, g);
  h1.wait();
  h2.wait();
  const auto got_alone = alone->download(), got_all = everyone->download();
  const double ranks = size() * (size() + 1) / 2.0;
  for (int i = 0; i < 64; ++i) {
    REQUIRE(got_alone[i] == Approx((rank() + 1) * i));
    REQUIRE(got_all[i] == Approx(ranks * i));
  }
  for (auto& set : singles) remove_process_set(set);
}

TEST_CASE("every collective in a set added at run time, on the GPU") {
  if (size() < 3) {
    SUCCEED("a set of two ranks that is not the global set needs np >= 3 (registered at np=4)");
    return;
  }
  const int last = size() - 1;
  ProcessSet ends = add_process_set({last, 0});  // set rank 0 is global rank 0, set rank 1 the last
  std::vector<int> middle_ranks;
  for (int r = 1; r < last; ++r) middle_ranks.push_back(r);
  ProcessSet middle = add_process_set(middle_ranks);
  const bool member = rank() == 0 || rank() == last;
  if (!member) {  // the others reduce among themselves meanwhile
    auto t = device_ramp(DataType::Float32, 16, rank() + 1);
    AllreduceOptions o{ReduceOp::Sum, "gpu.middle"};
    o.process_set = middle;
    allreduce_async(t, t, o).wait();
    const double sum = (2 + last) * (last - 1) / 2.0;  // ranks 1..last-1, each rank + 1
    const auto got = t->download();
    for (int i = 0; i < 16; ++i) REQUIRE(got[i] == Approx(sum * i));
    remove_process_set(middle);
    remove_process_set(ends);
    return;
  }
  const int me = rank() == 0 ? 0 : 1;  // rank in the set
  const double mine = rank() + 1, first = 1, second = last + 1;

  AllreduceOptions ar{ReduceOp::Average, "gpu.set.allreduce"};
  ar.process_set = ends;
  auto t = device_ramp(DataType::Float64, 10, mine);
  allreduce_async(t, t, ar).wait();
  auto got = t->download();
  for (int i = 0; i < 10; ++i) REQUIRE(got[i] == Approx((first + second) / 2 * i));

  BroadcastOptions b{last, "gpu.set.broadcast"};  // the root is a global rank, as in Horovod
  b.process_set = ends;
  auto bt = device_ramp(DataType::Float32, 5, mine);
  broadcast_async(bt, bt, b).wait();
  got = bt->download();
  for (int i = 0; i < 5; ++i) REQUIRE(got[i] == Approx(second * i));

  AllgatherOptions ag{"gpu.set.allgather"};  // set rank k sends k + 1 rows
  ag.process_set = ends;
  auto gt = device_ramp(DataType::Int32, me + 1, mine);
  Handle gh = allgather_async(gt, test::device_allocator(), ag);
  gh.wait();
  REQUIRE(gh.outputs().front()->shape() == TensorShape{3});
  got = static_cast<DeviceTensor&>(*gh.outputs().front()).download();
  REQUIRE(got == std::vector<double>{0, 0, second});

  AlltoallOptions aa;
  aa.splits = me == 0 ? std::vector<std::int64_t>{1, 2} : std::vector<std::int64_t>{2, 1};
  aa.name = "gpu.set.alltoall";
  aa.process_set = ends;
  auto at = device_ramp(DataType::Float32, 3, mine);  // rows mine * {0, 1, 2}
  Handle ah = alltoall_async(at, test::device_allocator(), aa);
  ah.wait();
  // Set rank 0 receives row 0 of its own and rows 0-1 of set rank 1; set rank 1 rows 1-2 of set
  // rank 0 and row 2 of its own.
  const std::vector<std::int64_t> want_splits = me == 0 ? std::vector<std::int64_t>{1, 2} : std::vector<std::int64_t>{2, 1};
  CHECK(ah.received_splits() == want_splits);
  got = static_cast<DeviceTensor&>(*ah.outputs().front()).download();
  const std::vector<double> want = me == 0 ? std::vector<double>{0, 0, second} : std::vector<double>{first, 2 * first, 2 * second};
  REQUIRE(got == want);

  ReducescatterOptions rs{ReduceOp::Sum, "gpu.set.reducescatter"};
  rs.process_set = ends;
  auto rt = device_ramp(DataType::Float32, 4, mine);
  Handle rh = reducescatter_async(rt, test::device_allocator(), rs);
  rh.wait();
  got = static_cast<DeviceTensor&>(*rh.outputs().front()).download();
  REQUIRE(got.size() == 2);
  for (int j = 0; j < 2; ++j) REQUIRE(got[j] == Approx((first + second) * (2 * me + j)));
  remove_process_set(middle);
  remove_process_set(ends);
}

int main(int argc, char** argv) {
  if (const int skip = test::start_on_gpu("the NCCL process set tests")) return skip;
  return test::run_session_on_every_rank(argc, argv);
}
