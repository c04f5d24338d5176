// Allreduce (every dtype x reduce op, scale factors, fusion, groups, empty tensors), the
// response cache, threads, barrier, join and topology on host memory, against closed forms.
// The data-movement collectives are in test_data_movement.cc.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "closed_forms.h"
#include "core/introspection.h"

using namespace hvd;
using hvd::test::count_mismatches;
using hvd::test::filled;
using hvd::test::kEveryDtype;
using hvd::test::kEveryReduceOp;
using hvd::test::rank_value;
using hvd::test::reduced_over_ranks;
using hvd::test::read_as_double;

TEST_CASE("allreduce: every dtype and reduce op matches the closed form", "[allreduce]") {
  const int rank = hvd::rank(), size = hvd::size();
  for (DataType dtype : kEveryDtype) {
    for (ReduceOp op : kEveryReduceOp) {
      for (std::int64_t n : {1, 17, 1000}) {
        auto input = filled(dtype, {n}, [&](std::int64_t i) { return rank_value(rank, i, op); });
        auto output = HostTensor::allocate(dtype, {n});
        const std::string name = std::string("ar.") + dtype_name(dtype) + "." + reduce_op_name(op) + "." + std::to_string(n);
        allreduce_async(input, output, {op, name}).wait();
        INFO(name);
        CHECK(count_mismatches(*output, [&](std::int64_t i) { return reduced_over_ranks(op, i, dtype, size); }) == 0);
        // The input is left untouched by an out-of-place allreduce.
        CHECK(read_as_double(*input, 0) == rank_value(rank, 0, op));
      }
    }
  }
}

namespace {

// Average over ranks r of 2 * (r + 1) * (i % 2 + 1) with prescale 0.5 and postscale 4: the
// integer dtypes divide the sum truncating toward zero, then scale (Note [Integer averages are
// exact], core/integer_average.h).
double scaled_average(DataType dtype, std::int64_t i, int size) {
  if (!hvd::test::integer_dtype(dtype)) return 2.0 * (size + 1) * (i % 2 + 1);
  const std::int64_t sum = static_cast<std::int64_t>(size) * (size + 1) / 2 * (i % 2 + 1);
  return static_cast<double>(sum / size * 4);
}

}  // namespace

TEST_CASE("allreduce: in place, prescale and postscale on every dtype", "[allreduce]") {
  const int rank = hvd::rank(), size = hvd::size();
  // Small values and factors of 2 keep every dtype exact (int8 included at np=4).
  auto base = [&](std::int64_t i) { return (rank + 1) * (i % 2 + 1); };
  for (DataType dtype : kEveryDtype) {
    INFO(dtype_name(dtype));
    auto t = filled(dtype, {6, 7}, base);
    allreduce_async(t, t, {ReduceOp::Sum, std::string("scaled.") + dtype_name(dtype), 2.0, 3.0}).wait();
    CHECK(count_mismatches(*t, [&](std::int64_t i) { return 6 * size * (size + 1) / 2.0 * (i % 2 + 1); }) == 0);
    // Average with factors: sum of (2 * base * 0.5), divided by size (truncated for integers),
    // times 4.
    auto avg = filled(dtype, {5}, [&](std::int64_t i) { return 2 * base(i); });
    allreduce_async(avg, avg, {ReduceOp::Average, std::string("scaled.average.") + dtype_name(dtype), 0.5, 4.0}).wait();
    CHECK(count_mismatches(*avg, [&](std::int64_t i) { return scaled_average(dtype, i, size); }) == 0);
  }
}

// A SubmissionBatch puts these in one cycle, so each dtype's tensors fuse, and the factors are
// applied on the way into and out of the fusion buffer: in place and into another output alike.
TEST_CASE("allreduce: fused tensors of every dtype with prescale and postscale, in a batch", "[allreduce][fusion][batch]") {
  const int rank = hvd::rank(), size = hvd::size();
  auto base = [&](std::int64_t i) { return (rank + 1) * (i % 2 + 1); };
  std::vector<std::shared_ptr<HostTensor>> in_place, sources, outputs;
  std::vector<Handle> handles;
  {
    SubmissionBatch batch;
    for (DataType dtype : kEveryDtype)
      for (int k = 0; k < 3; ++k) {
        const std::string tag = std::string(dtype_name(dtype)) + "." + std::to_string(k);
        in_place.push_back(filled(dtype, {k + 2}, [&](std::int64_t i) { return 2 * base(i); }));
        handles.push_back(allreduce_async(in_place.back(), in_place.back(),
                                          {ReduceOp::Average, "batch.inplace." + tag, 0.5, 4.0}));
        sources.push_back(filled(dtype, {k + 3}, base));
        outputs.push_back(filled(dtype, {k + 3}, [](std::int64_t) { return 0; }));
        handles.push_back(allreduce_async(sources.back(), outputs.back(), {ReduceOp::Sum, "batch.out." + tag, 2.0, 3.0}));
      }
  }
  for (auto& h : handles) h.wait();
  for (std::size_t t = 0; t < in_place.size(); ++t) {
    INFO("tensor " << t << " of " << dtype_name(in_place[t]->dtype()));
    CHECK(count_mismatches(*in_place[t], [&](std::int64_t i) { return scaled_average(in_place[t]->dtype(), i, size); }) == 0);
    CHECK(count_mismatches(*outputs[t], [&](std::int64_t i) { return 6 * size * (size + 1) / 2.0 * (i % 2 + 1); }) == 0);
    CHECK(count_mismatches(*sources[t], base) == 0);  // the input is left as it was
  }
}

TEST_CASE("a handle waited on inside its open batch still completes", "[allreduce][batch]") {
  const int size = hvd::size();
  SubmissionBatch batch;
  auto t = filled(DataType::Float32, {4}, [](std::int64_t i) { return i; });
  allreduce_async(t, t, {ReduceOp::Sum, "batch.waited.inside"}).wait();  // released by the hold
  CHECK(count_mismatches(*t, [&](std::int64_t i) { return static_cast<double>(size * i); }) == 0);
}

TEST_CASE("allreduce: many tensors at once are fused and each gets its own result", "[allreduce][fusion]") {
  const int rank = hvd::rank(), size = hvd::size();
  std::vector<std::shared_ptr<HostTensor>> tensors;
  std::vector<Handle> handles;
  for (int k = 0; k < 40; ++k) {
    tensors.push_back(filled(DataType::Float32, {k + 1}, [&](std::int64_t i) { return (rank + 1) * (k + i); }));
    handles.push_back(allreduce_async(tensors.back(), tensors.back(), {ReduceOp::Sum, "fuse." + std::to_string(k)}));
  }
  for (auto& h : handles) h.wait();
  for (int k = 0; k < 40; ++k) {
    INFO("tensor fuse." << k);
    CHECK(count_mismatches(*tensors[k], [&](std::int64_t i) { return size * (size + 1) / 2.0 * (k + i); }) == 0);
  }
}

TEST_CASE("allreduce: empty tensors, alone and fused with others, and odd sizes", "[allreduce]") {
  const int rank = hvd::rank(), size = hvd::size();
  for (DataType dtype : kEveryDtype) {
    auto empty = HostTensor::allocate(dtype, {0, 3});
    REQUIRE_NOTHROW(allreduce_async(empty, empty, {ReduceOp::Sum, std::string("empty.") + dtype_name(dtype)}).wait());
    CHECK(empty->shape() == TensorShape{0, 3});
  }
  // An empty tensor submitted among others rides in the same fused response without shifting them.
  std::vector<std::shared_ptr<HostTensor>> tensors;
  std::vector<Handle> handles;
  for (int k = 0; k < 6; ++k) {
    const std::int64_t n = k % 2 == 0 ? 0 : 8 + k;
    tensors.push_back(filled(DataType::Float32, {n}, [&](std::int64_t i) { return (rank + 1) * (k + i); }));
    handles.push_back(allreduce_async(tensors[k], tensors[k], {ReduceOp::Sum, "mixed." + std::to_string(k)}));
  }
  for (auto& h : handles) REQUIRE_NOTHROW(h.wait());
  for (int k = 1; k < 6; k += 2)
    CHECK(count_mismatches(*tensors[k], [&](std::int64_t i) { return size * (size + 1) / 2.0 * (k + i); }) == 0);
  for (std::int64_t n : {3, 127, 1023, 65537}) {
    auto t = filled(DataType::Int64, {n}, [&](std::int64_t i) { return (rank + 1) * i; });
    allreduce_async(t, t, {ReduceOp::Sum, "odd." + std::to_string(n)}).wait();
    CHECK(count_mismatches(*t, [&](std::int64_t i) { return size * (size + 1) / 2.0 * i; }) == 0);
  }
}

TEST_CASE("grouped allreduce returns every member reduced, repeatedly", "[allreduce][group]") {
  const int rank = hvd::rank(), size = hvd::size();
  for (int repeat = 0; repeat < 3; ++repeat) {  // a group submitted again is negotiated again, whole
    std::vector<TensorPtr> ins, outs;
    for (int k = 0; k < 5; ++k) {
      const std::int64_t n = k == 3 ? 0 : k + 2;  // an empty member changes nothing for the rest
      ins.push_back(filled(DataType::Float64, {n}, [&](std::int64_t i) { return rank * 10.0 + k + i + repeat; }));
      outs.push_back(HostTensor::allocate(DataType::Float64, {n}));
    }
    grouped_allreduce_async(ins, outs, {ReduceOp::Average, "group"}).wait();
    for (int k = 0; k < 5; ++k)
      CHECK(count_mismatches(*std::static_pointer_cast<HostTensor>(outs[k]),
                             [&](std::int64_t i) { return (size - 1) * 10.0 / 2 + k + i + repeat; }) == 0);
  }
}

TEST_CASE("a tensor submitted again skips negotiation through the response cache", "[allreduce][cache]") {
  const int rank = hvd::rank(), size = hvd::size();
  const char* capacity = std::getenv("HOROVOD_CACHE_CAPACITY");
  const bool cache_on = capacity == nullptr || std::string(capacity) != "0";
  const auto before = detail::controller_stats();
  const int steps = 40;
  for (int step = 0; step < steps; ++step) {
    auto t = filled(DataType::Float32, {64}, [&](std::int64_t i) { return (rank + 1) * (i + step); });
    allreduce_async(t, t, {ReduceOp::Sum, "cache.repeated"}).wait();
    REQUIRE(count_mismatches(*t, [&](std::int64_t i) { return size * (size + 1) / 2.0 * (i + step); }) == 0);
  }
  const auto after = detail::controller_stats();
  INFO("HOROVOD_CACHE_CAPACITY=" << (capacity ? capacity : "(default)"));
  // Every submission after the first is served from the cache, on every rank, or none is.
  CHECK(after.cache_hits - before.cache_hits == (cache_on ? steps - 1 : 0));
  CHECK(after.cache_invalidations == before.cache_invalidations);
  if (!cache_on) CHECK(after.slow_path_cycles - before.slow_path_cycles >= static_cast<std::uint64_t>(steps));
}

TEST_CASE("handles from several user threads at once", "[threads]") {
  const int rank = hvd::rank(), size = hvd::size();
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int k = 0; k < 25; ++k) {
        auto x = filled(DataType::Float32, {16}, [&](std::int64_t i) { return (rank + 1) * (t + k + i); });
        allreduce_async(x, x, {ReduceOp::Sum, "thread" + std::to_string(t) + "." + std::to_string(k)}).wait();
        for (std::int64_t i = 0; i < 16; ++i)
          if (read_as_double(*x, i) != size * (size + 1) / 2.0 * (t + k + i)) ++wrong[t];
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) CHECK(wrong[t] == 0);
}

TEST_CASE("barrier holds every rank until the slowest arrives", "[barrier]") {
  const auto start = std::chrono::steady_clock::now();
  if (hvd::rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  hvd::barrier();
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK(waited >= std::chrono::milliseconds(250));
}

TEST_CASE("join: ranks with fewer steps join and contribute zeros", "[join]") {
  const int rank = hvd::rank(), size = hvd::size();
  const int my_steps = 2 * (rank + 1);
  for (int step = 0; step < my_steps; ++step) {
    // Two tensors per step, so joined ranks also stand in inside fused responses.
    auto g = filled(DataType::Float32, {4}, [&](std::int64_t i) { return (rank + 1) * (i + 1); });
    auto a = filled(DataType::Float64, {3}, [&](std::int64_t i) { return (rank + 1) * (i + 2); });
    auto hg = allreduce_async(g, g, {ReduceOp::Sum, "join.grad"});
    auto ha = allreduce_async(a, a, {ReduceOp::Average, "join.avg"});
    hg.wait();
    ha.wait();
    // Ranks still stepping at this step are those with 2 * (r + 1) > step.
    double active = 0;
    for (int r = 0; r < size; ++r)
      if (2 * (r + 1) > step) active += r + 1;
    INFO("step " << step);
    CHECK(count_mismatches(*g, [&](std::int64_t i) { return active * (i + 1); }) == 0);
    // Average divides by the whole world: joined ranks count, with zeros.
    for (std::int64_t i = 0; i < 3; ++i) CHECK(read_as_double(*a, i) == Approx(active * (i + 2) / size));
  }
  const int last = hvd::join();
  CHECK(last == size - 1);
  // Everything works normally after the join completes.
  auto after = filled(DataType::Float32, {2}, [&](std::int64_t) { return 1; });
  allreduce_async(after, after, {ReduceOp::Sum, "after.join"}).wait();
  CHECK(read_as_double(*after, 1) == size);
}

namespace {

// The ranks that a "cannot run while rank 2 has joined" / "while ranks 0, 2 have joined" error names.
std::vector<int> joined_ranks_named(const std::string& message) {
  static const std::regex pattern("while ranks? ([0-9, ]+) ha(?:s|ve) joined");
  std::smatch match;
  std::vector<int> ranks;
  if (!std::regex_search(message, match, pattern)) return ranks;
  std::istringstream list(match[1].str());
  for (std::string item; std::getline(list, item, ',');) ranks.push_back(std::stoi(item));
  return ranks;
}

}  // namespace

TEST_CASE("join: other collectives fail at once on the ranks still running", "[join]") {
  // Each rank in turn joins first. The others' allgathers can never complete (the joined rank
  // waits in join() until all have joined), so they fail as soon as the coordinator sees a
  // joined rank lacking them, even when the ranks do not agree on the name (as with generated
  // names once some ranks skipped a call): here every rank uses its own name.
  const int rank = hvd::rank(), size = hvd::size();
  for (int first = 0; first < size; ++first) {
    if (rank != first) {
      auto t = filled(DataType::Float32, {2, 3}, [](std::int64_t i) { return i; });
      const std::string name = "joined.gather." + std::to_string(first) + ".rank" + std::to_string(rank);
      try {
        allgather_async(t, host_allocator(), {name}).wait();
        FAIL("an allgather succeeded while rank " << first << " had joined");
      } catch (const Error& e) {
        CHECK_THAT(e.what(), Catch::Contains("'" + name + "'") && Catch::Contains("joined"));
        // Others may have joined by then as well ("ranks 0, 2, 3 have joined"): `first` must be among them.
        const std::vector<int> named = joined_ranks_named(e.what());
        CHECK(std::find(named.begin(), named.end(), first) != named.end());
      }
    }
    const int last = hvd::join();
    CHECK(last != first);
    auto agreed = filled(DataType::Int32, {1}, [&](std::int64_t) { return last; });
    allreduce_async(agreed, agreed, {ReduceOp::Max, "joined.last." + std::to_string(first)}).wait();
    CHECK(read_as_double(*agreed, 0) == last);  // the same last rank everywhere
  }
  auto after = filled(DataType::Float32, {2}, [&](std::int64_t) { return 1; });
  allreduce_async(after, after, {ReduceOp::Sum, "after.joined.gather"}).wait();
  CHECK(read_as_double(*after, 0) == size);
}

TEST_CASE("names may be omitted when every rank calls in the same order", "[names]") {
  const int size = hvd::size();
  for (int k = 0; k < 3; ++k) {
    auto t = filled(DataType::Int32, {3}, [&](std::int64_t) { return 1; });
    allreduce_async(t, t, {ReduceOp::Sum, ""}).wait();
    CHECK(read_as_double(*t, 2) == size);
  }
}

TEST_CASE("topology: local ranks share the node, cross ranks span nodes", "[topology]") {
  CHECK(hvd::local_rank() == hvd::rank() % hvd::local_size());
  CHECK(hvd::local_size() * hvd::cross_size() == hvd::size());
  auto t = filled(DataType::Int32, {1}, [&](std::int64_t) { return hvd::local_rank() == 0 ? 1 : 0; });
  allreduce_async(t, t, {ReduceOp::Sum, "topology.nodes"}).wait();
  CHECK(read_as_double(*t, 0) == hvd::cross_size());
}
