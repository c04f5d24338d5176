// The mixed workload (tests/common/mixed_workload.h) on device tensors, through the NCCL backend:
// a random mix of every collective in a different order on every rank, from two threads, against
// closed forms; from np=3 some in a process set. Skips (code 77) without a CUDA device, as the
// other GPU tests do; in CI it runs on the emulated CUDA runtime and NCCL
// (test_nccl_mixed_workload_emulated). HVD_TEST_SEED picks the mix; every failure names it.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdlib>

#include "tests/common/every_rank_session.h"
#include "tests/common/mixed_workload.h"
#include "tests/gpu/gpu_test_util.h"

using namespace hvd;

namespace {

struct DeviceMemory {
  static TensorPtr input(DataType dtype, TensorShape shape, const std::vector<double>& values) {
    auto t = test::DeviceTensor::allocate(dtype, std::move(shape));
    t->upload(values);
    return t;
  }
  static TensorPtr output(DataType dtype, TensorShape shape) {
    return test::DeviceTensor::allocate(dtype, std::move(shape));
  }
  static OutputAllocator allocator() { return test::device_allocator(); }
  static std::vector<double> read(const TensorPtr& t) {
    return std::static_pointer_cast<test::DeviceTensor>(t)->download();
  }
};

int rounds_from_environment() {
  const char* text = std::getenv("HVD_TEST_ROUNDS");
  return text != nullptr && *text != '\0' ? std::atoi(text) : 40;
}

}  // namespace

TEST_CASE("a random mix of NCCL collectives in a different order on every rank, from two threads", "[mixed]") {
  const int rounds = rounds_from_environment();
  const auto outcome = test::mixed::run<DeviceMemory>(test::mixed::seed_from_environment(), rounds);
  for (std::size_t i = 0; i < std::min<std::size_t>(outcome.failures.size(), 5); ++i)
    UNSCOPED_INFO(outcome.failures[i]);
  CHECK(outcome.failures.empty());
  CHECK(outcome.checked >= rounds * 3);
}

int main(int argc, char** argv) {
  if (const int skip = test::start_on_gpu("the NCCL mixed workload")) return skip;
  return test::run_session_on_every_rank(argc, argv);
}
