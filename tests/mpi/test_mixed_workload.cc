// The mixed workload (tests/common/mixed_workload.h) on host tensors, through the MPI backend: a
// random mix of every collective in a different order on every rank, from two threads, against
// closed forms. HVD_TEST_SEED picks the mix; every failure names it and the round.
#include <catch2/catch.hpp>

#include "test_support.h"
#include "tests/common/mixed_workload.h"

namespace {

struct HostMemory {
  static hvd::TensorPtr input(hvd::DataType dtype, hvd::TensorShape shape, const std::vector<double>& values) {
    return hvd::test::filled(dtype, std::move(shape),
                             [&](std::int64_t i) { return values[static_cast<std::size_t>(i)]; });
  }
  static hvd::TensorPtr output(hvd::DataType dtype, hvd::TensorShape shape) {
    return hvd::HostTensor::allocate(dtype, std::move(shape));
  }
  static hvd::OutputAllocator allocator() { return hvd::host_allocator(); }
  static std::vector<double> read(const hvd::TensorPtr& t) {
    const auto& host = static_cast<const hvd::HostTensor&>(*t);
    std::vector<double> out(static_cast<std::size_t>(host.num_elements()));
    for (std::int64_t i = 0; i < host.num_elements(); ++i)
      out[static_cast<std::size_t>(i)] = hvd::test::read_as_double(host, i);
    return out;
  }
};

}  // namespace

TEST_CASE("a random mix of collectives in a different order on every rank, from two threads", "[mixed]") {
  const int rounds = 100;
  const auto outcome = hvd::test::mixed::run<HostMemory>(hvd::test::mixed::seed_from_environment(), rounds);
  for (std::size_t i = 0; i < std::min<std::size_t>(outcome.failures.size(), 5); ++i)
    UNSCOPED_INFO(outcome.failures[i]);
  CHECK(outcome.failures.empty());
  // Nothing above can pass by checking nothing: every rank checked what it submitted.
  CHECK(outcome.checked >= rounds * 3);
}
