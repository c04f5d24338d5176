// hvd::torch collectives against closed forms, for several dtypes, and their error paths.
#include "torch_test_util.h"

namespace ht = hvd::torch;

namespace {

const std::vector<torch::ScalarType> kAllTypes = {torch::kUInt8,   torch::kInt8,     torch::kInt16,   torch::kInt32,
                                                  torch::kInt64,   torch::kFloat16,  torch::kBFloat16,
                                                  torch::kFloat32, torch::kFloat64};
const std::vector<torch::ScalarType> kFloatTypes = {torch::kFloat16, torch::kBFloat16, torch::kFloat32,
                                                    torch::kFloat64};

// i = 0..n-1 scaled by `factor`, as float64 for comparisons.
torch::Tensor ramp(std::int64_t n, double factor) { return torch::arange(n, torch::kFloat64) * factor; }

std::string type_name(torch::ScalarType t) { return c10::toString(t); }

using hvd_test::error_of;

}  // namespace

TEST_CASE("allreduce: sum, min, max and average against closed forms", "[ops]") {
  const int size = hvd::size();
  const int rank = hvd::rank();
  const std::int64_t n = 10;  // values stay below 127 for int8 at size 4
  for (auto type : kAllTypes) {
    INFO("dtype " << type_name(type));
    torch::Tensor t = ramp(n, rank + 1).to(type);
    auto sum = ht::allreduce(t, {hvd::ReduceOp::Sum, "ar.sum." + type_name(type)});
    CHECK(torch::equal(sum.to(torch::kFloat64), ramp(n, size * (size + 1) / 2.0)));
    CHECK(sum.scalar_type() == type);
    auto mn = ht::allreduce(t, {hvd::ReduceOp::Min, "ar.min." + type_name(type)});
    CHECK(torch::equal(mn.to(torch::kFloat64), ramp(n, 1)));
    auto mx = ht::allreduce(t, {hvd::ReduceOp::Max, "ar.max." + type_name(type)});
    CHECK(torch::equal(mx.to(torch::kFloat64), ramp(n, size)));
    CHECK(torch::equal(t.to(torch::kFloat64), ramp(n, rank + 1)));  // input untouched
  }
  for (auto type : kFloatTypes) {
    INFO("dtype " << type_name(type));
    torch::Tensor t = ramp(n, rank + 1).to(type);
    auto avg = ht::allreduce(t, {hvd::ReduceOp::Average, "ar.avg." + type_name(type)});
    CHECK(torch::equal(avg.to(torch::kFloat64), ramp(n, (size + 1) / 2.0)));
  }
}

TEST_CASE("allreduce: pre- and postscale, generated names, 2-d shapes", "[ops]") {
  const int size = hvd::size();
  const int rank = hvd::rank();
  torch::Tensor t = ramp(12, rank + 1).to(torch::kFloat32).reshape({3, 4});
  hvd::AllreduceOptions o;
  o.op = hvd::ReduceOp::Sum;
  o.prescale_factor = 2.0;
  o.postscale_factor = 0.5;
  auto out = ht::allreduce(t);  // unnamed, Average
  CHECK(out.sizes() == t.sizes());
  CHECK(torch::allclose(out.to(torch::kFloat64), ramp(12, (size + 1) / 2.0).reshape({3, 4})));
  auto scaled = ht::allreduce(t, o);
  CHECK(torch::equal(scaled.to(torch::kFloat64), ramp(12, size * (size + 1) / 2.0).reshape({3, 4})));
}

TEST_CASE("allreduce_async_ works in place with poll and synchronize", "[ops]") {
  const int size = hvd::size();
  const int rank = hvd::rank();
  torch::Tensor t = ramp(100, rank + 1).to(torch::kFloat64);
  void* before = t.data_ptr();
  auto h = ht::allreduce_async_(t, {hvd::ReduceOp::Sum, "ar.inplace"});
  while (!ht::poll(h)) {
  }
  auto out = ht::synchronize(h);
  CHECK(out.data_ptr() == before);
  CHECK(t.data_ptr() == before);
  CHECK(torch::equal(t, ramp(100, size * (size + 1) / 2.0)));
  ht::allreduce_(t, {hvd::ReduceOp::Min, "ar.inplace.min"});
  CHECK(torch::equal(t, ramp(100, size * (size + 1) / 2.0)));
}

TEST_CASE("grouped_allreduce reduces every tensor of the group", "[ops]") {
  const int size = hvd::size();
  const int rank = hvd::rank();
  std::vector<torch::Tensor> ts = {ramp(5, rank + 1).to(torch::kFloat32), ramp(7, 2 * (rank + 1)).to(torch::kFloat64),
                                   ramp(3, rank + 1).to(torch::kInt32)};
  auto outs = ht::grouped_allreduce(ts, {hvd::ReduceOp::Sum, "grouped"});
  REQUIRE(outs.size() == 3);
  CHECK(torch::equal(outs[0].to(torch::kFloat64), ramp(5, size * (size + 1) / 2.0)));
  CHECK(torch::equal(outs[1].to(torch::kFloat64), ramp(7, size * (size + 1.0))));
  CHECK(torch::equal(outs[2].to(torch::kFloat64), ramp(3, size * (size + 1) / 2.0)));
  ht::grouped_allreduce_(ts, {hvd::ReduceOp::Max, "grouped.inplace"});
  CHECK(torch::equal(ts[0].to(torch::kFloat64), ramp(5, size)));
  CHECK(torch::equal(ts[2].to(torch::kFloat64), ramp(3, size)));
}

TEST_CASE("allgather concatenates ranks' rows of different counts", "[ops]") {
  const int size = hvd::size();
  const int rank = hvd::rank();
  for (auto type : kAllTypes) {
    INFO("dtype " << type_name(type));
    // rank r contributes r+1 rows of 3 columns, value 10*r + row.
    torch::Tensor mine = (torch::arange(rank + 1, torch::kFloat64) + 10.0 * rank).unsqueeze(1).repeat({1, 3});
    auto all = ht::allgather(mine.to(type), {"ag." + type_name(type)});
    REQUIRE(all.size(0) == size * (size + 1) / 2);
    CHECK(all.size(1) == 3);
    CHECK(all.scalar_type() == type);
    std::int64_t row = 0;
    for (int r = 0; r < size; ++r)
      for (int j = 0; j <= r; ++j, ++row) CHECK(all[row][2].item<double>() == 10.0 * r + j);
  }
}

TEST_CASE("broadcast and broadcast_ copy root's values", "[ops]") {
  const int size = hvd::size();
  const int rank = hvd::rank();
  const int root = size - 1;
  for (auto type : kAllTypes) {
    INFO("dtype " << type_name(type));
    torch::Tensor t = ramp(6, rank + 1).to(type);
    auto out = ht::broadcast(t, {root, "bc." + type_name(type)});
    CHECK(torch::equal(out.to(torch::kFloat64), ramp(6, root + 1)));
    CHECK(torch::equal(t.to(torch::kFloat64), ramp(6, rank + 1)));
    ht::broadcast_(t, {root, "bc_." + type_name(type)});
    CHECK(torch::equal(t.to(torch::kFloat64), ramp(6, root + 1)));
  }
}

TEST_CASE("alltoall sends splits[d] rows to rank d and reports received splits", "[ops]") {
  const int size = hvd::size();
  const int rank = hvd::rank();
  for (auto type : {torch::kUInt8, torch::kInt64, torch::kFloat16, torch::kFloat32}) {
    INFO("dtype " << type_name(type));
    // Rank r sends d+1 rows to rank d, each row holding 10*r + d.
    std::vector<std::int64_t> splits;
    std::vector<torch::Tensor> blocks;
    for (int d = 0; d < size; ++d) {
      splits.push_back(d + 1);
      blocks.push_back(torch::full({d + 1, 2}, 10.0 * rank + d, torch::kFloat64));
    }
    std::vector<std::int64_t> received;
    auto out = ht::alltoall(torch::cat(blocks).to(type), {splits, "a2a." + type_name(type)}, &received);
    REQUIRE(out.size(0) == size * (rank + 1));
    CHECK(received == std::vector<std::int64_t>(size, rank + 1));
    for (int src = 0; src < size; ++src)
      for (int j = 0; j <= rank; ++j) CHECK(out[src * (rank + 1) + j][1].item<double>() == 10.0 * src + rank);
  }
  // Even split when no splits are given.
  auto even = ht::alltoall(torch::full({2 * size}, static_cast<double>(rank), torch::kFloat32), {{}, "a2a.even"});
  REQUIRE(even.size(0) == 2 * size);
  for (int src = 0; src < size; ++src) CHECK(even[2 * src + 1].item<double>() == src);
}

TEST_CASE("reducescatter keeps this rank's block of the reduction", "[ops]") {
  const int size = hvd::size();
  const int rank = hvd::rank();
  const std::int64_t rows = 2 * size + 1;  // uneven: rank 0 gets one extra row
  for (auto type : {torch::kInt32, torch::kFloat32, torch::kFloat64, torch::kBFloat16}) {
    INFO("dtype " << type_name(type));
    torch::Tensor t = ramp(rows, rank + 1).unsqueeze(1).repeat({1, 3}).to(type);
    auto out = ht::reducescatter(t, {hvd::ReduceOp::Sum, "rs." + type_name(type)});
    const std::int64_t mine = rows / size + (rank < rows % size ? 1 : 0);
    std::int64_t first = 0;
    for (int r = 0; r < rank; ++r) first += rows / size + (r < rows % size ? 1 : 0);
    REQUIRE(out.size(0) == mine);
    CHECK(out.size(1) == 3);
    for (std::int64_t i = 0; i < mine; ++i)
      CHECK(out[i][0].item<double>() == (first + i) * size * (size + 1) / 2.0);
  }
}

TEST_CASE("grouped_allgather and grouped_reducescatter: every member against the closed form", "[ops][grouped]") {
  const int size = hvd::size();
  const int rank = hvd::rank();
  for (auto type : kAllTypes) {
    INFO("dtype " << type_name(type));
    // Member k: this rank's rank + k rows of k + 2 columns, all 10 * rank + k.
    std::vector<torch::Tensor> mine;
    for (int k = 0; k < 3; ++k) mine.push_back(torch::full({rank + k, k + 2}, 10.0 * rank + k, torch::kFloat64).to(type));
    auto gathered = ht::grouped_allgather(mine, {"gag." + type_name(type)});
    REQUIRE(gathered.size() == 3);
    for (int k = 0; k < 3; ++k) {
      std::vector<torch::Tensor> parts;
      for (int r = 0; r < size; ++r) parts.push_back(torch::full({r + k, k + 2}, 10.0 * r + k, torch::kFloat64));
      CHECK(gathered[k].scalar_type() == type);
      CHECK(torch::equal(gathered[k].to(torch::kFloat64), torch::cat(parts)));
    }
  }
  for (auto type : {torch::kInt32, torch::kFloat32, torch::kFloat64, torch::kBFloat16}) {
    INFO("dtype " << type_name(type));
    const std::vector<std::int64_t> rows = {2 * size + 1, size, 1};
    std::vector<torch::Tensor> mine;
    for (auto n : rows) mine.push_back(ramp(n, rank + 1).unsqueeze(1).repeat({1, 2}).to(type));
    auto handle = ht::grouped_reducescatter_async(mine, {hvd::ReduceOp::Sum, "grs." + type_name(type)});
    auto outs = handle.wait_all();
    REQUIRE(outs.size() == rows.size());
    for (std::size_t k = 0; k < rows.size(); ++k) {
      const std::int64_t n = rows[k], count = n / size + (rank < n % size ? 1 : 0);
      const std::int64_t first = rank * (n / size) + std::min<std::int64_t>(rank, n % size);
      auto expected = ramp(n, size * (size + 1) / 2.0).unsqueeze(1).repeat({1, 2}).slice(0, first, first + count);
      CHECK(torch::equal(outs[k].to(torch::kFloat64), expected));
    }
  }
}

TEST_CASE("async ops hand back their outputs through the handle", "[ops]") {
  const int size = hvd::size();
  const int rank = hvd::rank();
  auto h1 = ht::allgather_async(torch::full({1}, rank, torch::kInt64), {"async.ag"});
  auto h2 = ht::broadcast_async(torch::full({2}, rank, torch::kFloat32), {0, "async.bc"});
  auto h3 = ht::reducescatter_async(torch::ones({size}, torch::kFloat32), {hvd::ReduceOp::Sum, "async.rs"});
  auto h4 = ht::alltoall_async(torch::full({size}, rank, torch::kInt32), {{}, "async.a2a"});
  CHECK(torch::equal(h1.wait(), torch::arange(size, torch::kInt64)));
  CHECK(torch::equal(h2.wait(), torch::zeros({2}, torch::kFloat32)));
  CHECK(torch::equal(h3.wait(), torch::full({1}, size, torch::kFloat32)));
  CHECK(torch::equal(h4.wait(), torch::arange(size, torch::kInt32)));
  CHECK(h4.received_splits() == std::vector<std::int64_t>(size, 1));
}

TEST_CASE("bad tensors and arguments are rejected before anything is sent", "[ops][errors]") {
  const int size = hvd::size();
  torch::Tensor good = torch::ones({4, 2});
  CHECK_THAT(error_of([&] { ht::allreduce(torch::Tensor(), {hvd::ReduceOp::Sum, "undef"}); }),
             Catch::Contains("allreduce of 'undef': the tensor is undefined"));
  CHECK_THAT(error_of([&] { ht::allreduce_async_(torch::Tensor()); }),
             Catch::Contains("allreduce of an unnamed tensor: the tensor is undefined"));
  CHECK_THAT(error_of([&] { ht::allreduce(torch::ones({3, 4}).t(), {hvd::ReduceOp::Sum, "transposed"}); }),
             Catch::Contains("'transposed': the tensor is not contiguous"));
  CHECK_THAT(error_of([&] { ht::allgather(torch::ones({2}, torch::kBool), {"flags"}); }),
             Catch::Contains("allgather of 'flags': dtype Bool is not supported"));
  CHECK_THAT(error_of([&] { ht::broadcast_(torch::ones({2}, torch::kComplexFloat), {0, "complex"}); }),
             Catch::Contains("dtype ComplexFloat is not supported"));
  CHECK_THAT(error_of([&] { ht::allreduce(torch::ones({2, 2}).to_sparse(), {hvd::ReduceOp::Sum, "sp"}); }),
             Catch::Contains("'sp': sparse tensors are not supported"));
  CHECK_THAT(error_of([&] { ht::allreduce(torch::empty({2}, torch::TensorOptions().device(torch::kMeta)), {hvd::ReduceOp::Sum, "m"}); }),
             Catch::Contains("allreduce of 'm': device meta is not supported (CPU or CUDA tensors only)"));
  CHECK_THAT(error_of([&] { ht::grouped_allreduce({good, torch::Tensor()}, {hvd::ReduceOp::Sum, "grp"}); }),
             Catch::Contains("grouped_allreduce of 'grp.1': the tensor is undefined"));
  CHECK_THAT(error_of([&] { ht::reducescatter(torch::ones({3, 4}).t(), {hvd::ReduceOp::Sum, "rs.t"}); }),
             Catch::Contains("reducescatter of 'rs.t': the tensor is not contiguous"));
  CHECK_THAT(error_of([&] { ht::alltoall(torch::Tensor(), {{}, "a2a.undef"}); }),
             Catch::Contains("alltoall of 'a2a.undef': the tensor is undefined"));
  CHECK_THAT(error_of([&] { ht::broadcast(good, {size, "root.high"}); }),
             Catch::Contains("broadcast of 'root.high': root rank " + std::to_string(size) + " is out of range"));
  CHECK_THAT(error_of([&] { ht::broadcast_(good, {-1, "root.low"}); }),
             Catch::Contains("root rank -1 is out of range"));
  std::vector<std::int64_t> bad_splits(size, 0);
  bad_splits[0] = 5;  // 5 rows requested of 4
  CHECK_THAT(error_of([&] { ht::alltoall(good, {bad_splits, "a2a.splits"}); }),
             Catch::Contains("alltoall of 'a2a.splits': splits sum to 5 but the first dimension is 4"));
  std::vector<std::int64_t> one_too_many(size + 1, 0);
  one_too_many[0] = 4;  // sums to the first dimension: only the count is wrong
  CHECK_THAT(error_of([&] { ht::alltoall(good, {one_too_many, "a2a.count"}); }),
             Catch::Contains("alltoall of 'a2a.count': " + std::to_string(size + 1) + " splits for " +
                             std::to_string(size) + " ranks"));
  CHECK_THAT(error_of([] { ht::synchronize(ht::Handle()); }), Catch::Contains("does not refer to an operation"));
  CHECK_THAT(error_of([] { ht::poll(ht::Handle()); }), Catch::Contains("does not refer to an operation"));
  // The runtime is still consistent on every rank after the rejected calls.
  auto sum = ht::allreduce(good, {hvd::ReduceOp::Sum, "after.errors"});
  CHECK(torch::equal(sum, torch::full({4, 2}, static_cast<float>(size))));
}

TEST_CASE("CUDA tensors reduce on the GPU with ready events", "[ops][cuda]") {
  if (!hvd_test::cuda_case_runs()) {
    SUCCEED("no CUDA device here");
    return;
  }
  const int size = hvd::size();
  const int rank = hvd::rank();
  const int devices = static_cast<int>(torch::cuda::device_count());
  torch::Device device(torch::kCUDA, hvd::local_rank() % devices);
  torch::Tensor t = ramp(1000, rank + 1).to(torch::kFloat32).to(device) * 1.0;  // produced by a kernel
  auto sum = ht::allreduce(t, {hvd::ReduceOp::Sum, "cuda.sum"});
  CHECK(sum.device() == device);
  CHECK(torch::equal(sum.cpu().to(torch::kFloat64), ramp(1000, size * (size + 1) / 2.0)));
  auto all = ht::allgather(torch::full({1, 2}, rank, torch::TensorOptions().dtype(torch::kFloat32).device(device)), {"cuda.ag"});
  CHECK(all.device() == device);
  CHECK(torch::equal(all.cpu().select(1, 0), torch::arange(size, torch::kFloat32)));
  ht::broadcast_(t, {0, "cuda.bc"});
  CHECK(torch::equal(t.cpu().to(torch::kFloat64), ramp(1000, 1)));
}

TEST_CASE("collectives in a process set: even and odd ranks, differentiable ones included", "[ops][process_set]") {
  const int size = hvd::size(), rank = hvd::rank();
  if (size < 2) return;  // the only set would have the global set's ranks
  std::vector<int> evens, odds;
  for (int r = 0; r < size; ++r) (r % 2 == 0 ? evens : odds).push_back(r);
  // Every rank registers both sets, in the same order (a set of one rank at np=2; none at np=1).
  hvd::ProcessSet even_set = hvd::add_process_set(evens);
  hvd::ProcessSet odd_set = odds.empty() ? hvd::ProcessSet() : hvd::add_process_set(odds);
  const hvd::ProcessSet& mine = rank % 2 == 0 ? even_set : odd_set;
  const std::vector<int>& members = rank % 2 == 0 ? evens : odds;
  double member_sum = 0;
  for (int r : members) member_sum += r + 1;

  hvd::AllreduceOptions sum{hvd::ReduceOp::Sum, "pset.sum"};
  sum.process_set = mine;
  CHECK(torch::equal(ht::allreduce(ramp(6, rank + 1), sum), ramp(6, member_sum)));

  // The gradient of a differentiable allreduce is reduced in the same set.
  auto x = ramp(4, rank + 1).requires_grad_(true);
  hvd::AllreduceOptions avg{hvd::ReduceOp::Average, "pset.avg"};
  avg.process_set = mine;
  auto y = ht::allreduce(x, avg);
  CHECK(torch::allclose(y.detach(), ramp(4, member_sum / members.size())));
  (y * (rank + 1)).sum().backward();
  CHECK(torch::allclose(x.grad(), torch::full({4}, member_sum / members.size(), torch::kFloat64)));

  // Differentiable allgather: this rank's rows come back with the gradient of its slice.
  auto g = torch::full({2, 3}, static_cast<double>(rank), torch::kFloat64).requires_grad_(true);
  hvd::AllgatherOptions gather{"pset.gather"};
  gather.process_set = mine;
  auto gathered = ht::allgather(g, gather);
  REQUIRE(gathered.size(0) == 2 * static_cast<std::int64_t>(members.size()));
  for (std::size_t k = 0; k < members.size(); ++k)
    CHECK(gathered[2 * k][0].item<double>() == members[k]);
  (gathered * 2).sum().backward();
  CHECK(torch::allclose(g.grad(), torch::full({2, 3}, 2.0 * members.size(), torch::kFloat64)));

  // Broadcast from the set's lowest rank (roots are global ranks, as in Horovod).
  hvd::BroadcastOptions b{members.front(), "pset.bcast"};
  b.process_set = mine;
  CHECK(torch::equal(ht::broadcast(ramp(3, rank + 1), b), ramp(3, members.front() + 1)));

  hvd::remove_process_set(even_set);
  if (!odds.empty()) hvd::remove_process_set(odd_set);
}
