// GPU tests of process sets on the NCCL backend (np=2): every rank alone in a set of one while
// the global set runs, and a set of both ranks added at run time in which every collective
// (alltoall's splits go through the set's control channel) is checked against a closed form.
// Skips (code 77) without a CUDA device, as the other GPU tests do.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "tests/gpu/gpu_test_util.h"

using namespace hvd;
using hvd::test::DeviceTensor;

namespace {

ProcessSet g_zero({0}), g_one({1});

test::DeviceTensorPtr device_ramp(DataType dtype, std::int64_t n, double factor) {
  std::vector<double> values(n);
  for (std::int64_t i = 0; i < n; ++i) values[i] = factor * i;
  auto t = DeviceTensor::allocate(dtype, {n});
  t->upload(values);
  return t;
}

}  // namespace

TEST_CASE("a set of one rank runs beside the global set on the GPU") {
  const ProcessSet& mine = rank() == 0 ? g_zero : g_one;
  auto alone = device_ramp(DataType::Float32, 64, rank() + 1);
  auto everyone = device_ramp(DataType::Float32, 64, rank() + 1);
  AllreduceOptions a{ReduceOp::Sum, "gpu.alone"};
  a.process_set = mine;
  AllreduceOptions g{ReduceOp::Sum, "gpu.everyone"};
  Handle h1 = allreduce_async(alone, alone, a);
  Handle h2 = allreduce_async(everyone, everyone, g);
  h1.wait();
  h2.wait();
  const auto got_alone = alone->download(), got_all = everyone->download();
  for (int i = 0; i < 64; ++i) {
    REQUIRE(got_alone[i] == Approx((rank() + 1) * i));
    REQUIRE(got_all[i] == Approx(3.0 * i));  // (0 + 1) + (1 + 1) at np=2
  }
}

TEST_CASE("every collective in a set added at run time, on the GPU") {
  ProcessSet both = add_process_set({1, 0});
  AllreduceOptions ar{ReduceOp::Average, "gpu.set.allreduce"};
  ar.process_set = both;
  auto t = device_ramp(DataType::Float64, 10, rank() + 1);
  allreduce_async(t, t, ar).wait();
  for (int i = 0; i < 10; ++i) REQUIRE(t->download()[i] == Approx(1.5 * i));

  BroadcastOptions b{1, "gpu.set.broadcast"};
  b.process_set = both;
  auto bt = device_ramp(DataType::Float32, 5, rank() + 1);
  broadcast_async(bt, bt, b).wait();
  for (int i = 0; i < 5; ++i) REQUIRE(bt->download()[i] == Approx(2.0 * i));

  AllgatherOptions ag{"gpu.set.allgather"};
  ag.process_set = both;
  auto gt = device_ramp(DataType::Int32, rank() + 1, 1);
  Handle gh = allgather_async(gt, test::device_allocator(), ag);
  gh.wait();
  REQUIRE(gh.outputs().front()->shape() == TensorShape{3});

  AlltoallOptions aa;
  aa.splits = {1, 2};  // one row to set rank 0, two to set rank 1
  aa.name = "gpu.set.alltoall";
  aa.process_set = both;
  auto at = device_ramp(DataType::Float32, 3, 1);
  Handle ah = alltoall_async(at, test::device_allocator(), aa);
  ah.wait();
  CHECK(ah.received_splits() == std::vector<std::int64_t>(2, rank() + 1));

  ReducescatterOptions rs{ReduceOp::Sum, "gpu.set.reducescatter"};
  rs.process_set = both;
  auto rt = device_ramp(DataType::Float32, 4, rank() + 1);
  Handle rh = reducescatter_async(rt, test::device_allocator(), rs);
  rh.wait();
  auto& out = static_cast<DeviceTensor&>(*rh.outputs().front());
  const auto got = out.download();
  REQUIRE(got.size() == 2);
  for (int j = 0; j < 2; ++j) REQUIRE(got[j] == Approx(3.0 * (2 * rank() + j)));
  remove_process_set(both);
}

int main(int argc, char** argv) {
  if (test::cuda_device_count() == 0) {
    std::printf("SKIPPED: no CUDA device is present (cudaGetDeviceCount reports none); "
                "the NCCL process set tests need a GPU\n");
    return test::kSkipReturnCode;
  }
  init({g_zero, g_one});
  const std::string why = test::gpu_skip_reason();
  if (!why.empty() || size() != 2) {
    if (rank() == 0) std::printf("SKIPPED: %s\n", why.empty() ? "these tests run at np=2" : why.c_str());
    shutdown();
    return test::kSkipReturnCode;
  }
  test::check_cuda(cudaSetDevice(local_rank() % test::cuda_device_count()), "cudaSetDevice");
  const int failed = Catch::Session().run(argc, argv);
  shutdown();
  return failed == 0 ? 0 : 1;
}
