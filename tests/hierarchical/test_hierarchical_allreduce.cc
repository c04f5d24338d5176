// Hierarchical allreduce on the host path (HOROVOD_HIERARCHICAL_ALLREDUCE=1) with a faked node
// split (HVD_TEST_FAKE_LOCAL_SIZE=2: np=4 is 2 nodes x 2 ranks, consecutive or, with
// HVD_TEST_FAKE_PLACEMENT=round_robin, dealt in turn as `mpirun --map-by node` does). Every
// dtype and reduce op, fused and unfused, with element counts that do not divide by the local
// size, against the closed form; the timeline proves the hierarchical op ran rather than the flat
// one.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "horovodcpp/horovod.h"
#include "tests/common/fake_placement.h"
#include "tests/common/rank_reduction.h"
#include "tests/mpi/test_support.h"

using namespace hvd;
using namespace hvd::test;

namespace {

// Counts below, at and around multiples of the local size (2) and of the node count.
const std::vector<std::int64_t> kCounts = {1, 2, 3, 5, 7, 1001};

// The closed form stored in the dtype, as the runtime stores its result.
double expected(ReduceOp op, std::int64_t i, DataType dtype, double prescale = 1, double postscale = 1) {
  auto t = HostTensor::allocate(dtype, {1});
  write_from_double(*t, 0, reduced_over_ranks(op, i, dtype, size(), prescale, postscale));
  return read_as_double(*t, 0);
}

std::shared_ptr<HostTensor> filled(DataType dtype, std::int64_t n, ReduceOp op) {
  auto t = HostTensor::allocate(dtype, {n});
  for (std::int64_t i = 0; i < n; ++i) write_from_double(*t, i, rank_value(rank(), i, op));
  return t;
}

void check(HostTensor& out, ReduceOp op, DataType dtype, const std::string& what, double pre = 1,
           double post = 1) {
  for (std::int64_t i = 0; i < out.num_elements(); ++i) {
    const double want = expected(op, i, dtype, pre, post);
    INFO(what << " element " << i << " on rank " << rank());
    REQUIRE(std::fabs(read_as_double(out, i) - want) <= tolerance(dtype) * std::max(1.0, std::fabs(want)));
  }
}

std::string label(const char* kind, DataType dtype, ReduceOp op, std::int64_t n) {
  return std::string(kind) + "." + dtype_name(dtype) + "." + reduce_op_name(op) + "." + std::to_string(n);
}

}  // namespace

TEST_CASE("the fake node split gives 2 ranks per node, in blocks or dealt round robin") {
  REQUIRE(local_size() == 2);
  const int nodes = size() / 2;
  REQUIRE(cross_size() == nodes);
  if (round_robin_placement()) {  // node n holds ranks n, n + nodes, ...
    REQUIRE(local_rank() == rank() / nodes);
    REQUIRE(cross_rank() == rank() % nodes);
  } else {
    REQUIRE(local_rank() == rank() % 2);
    REQUIRE(cross_rank() == rank() / 2);
  }
  const std::vector<int> mine = ranks_of_node(cross_rank(), 2, size());
  REQUIRE(mine.at(local_rank()) == rank());
}

TEST_CASE("hierarchical allreduce of one tensor: every dtype, op and remainder") {
  for (DataType dtype : kEveryDtype)
    for (ReduceOp op : kEveryReduceOp)
      for (std::int64_t n : kCounts) {
        auto in = filled(dtype, n, op);
        auto out = HostTensor::allocate(dtype, {n});
        const std::string name = label("h", dtype, op, n);
        allreduce_async(in, out, {op, name}).wait();
        check(*out, op, dtype, name);
      }
}

TEST_CASE("hierarchical allreduce of a fused group with odd total size") {
  for (DataType dtype : kEveryDtype)
    for (ReduceOp op : kEveryReduceOp) {
      std::vector<TensorPtr> inputs, outputs;
      for (std::int64_t n : kCounts) {
        inputs.push_back(filled(dtype, n, op));
        outputs.push_back(HostTensor::allocate(dtype, {n}));
      }
      const std::string name = label("g", dtype, op, 0);
      grouped_allreduce_async(inputs, outputs, {op, name}).wait();
      for (auto& out : outputs) check(static_cast<HostTensor&>(*out), op, dtype, name);
    }
}

TEST_CASE("hierarchical allreduce applies prescale and postscale once") {
  for (DataType dtype : {DataType::Float32, DataType::Float64, DataType::Float16}) {
    auto in = filled(dtype, 11, ReduceOp::Sum);
    allreduce_async(in, in, {ReduceOp::Average, label("s", dtype, ReduceOp::Average, 11), 0.5, 8.0}).wait();
    check(*in, ReduceOp::Average, dtype, "scaled", 0.5, 8.0);
  }
}

TEST_CASE("the hierarchical op, not the flat one, ran") {
  const std::string path = "hierarchical_timeline.json";
  start_timeline(path);
  auto in = filled(DataType::Float32, 9, ReduceOp::Sum);
  allreduce_async(in, in, {ReduceOp::Sum, "traced"}).wait();
  stop_timeline();
  check(*in, ReduceOp::Sum, DataType::Float32, "traced");
  if (rank() == 0) {  // only rank 0 records unless HOROVOD_TIMELINE_ALL_RANKS is set
    std::ifstream file(path);
    std::stringstream text;
    text << file.rdbuf();
    REQUIRE(text.str().find("MPI_HIERARCHICAL_ALLREDUCE") != std::string::npos);
    REQUIRE(text.str().find("\"MPI_ALLREDUCE\"") == std::string::npos);
    std::remove(path.c_str());
  }
}

int main(int argc, char** argv) {
  init();
  const int failed = Catch::Session().run(argc, argv);
  shutdown();
  return failed == 0 ? 0 : 1;
}
