// The LibTorch front end on process sets: collectives, the differentiable allreduce, object and
// parameter broadcasts (root is a global rank, as in Horovod), metric averages, and the errors
// of a rank or root outside the set. The sets are the even and the odd ranks (at np=1 the even
// set is the global set and the odd one is empty). Needs
// HOROVOD_DYNAMIC_PROCESS_SETS=1 (set by CMake for this registration).
#include "torch_test_util.h"

namespace ht = hvd::torch;
using hvd_test::error_of;

namespace {

// Every rank adds both sets, in the same order, and removes them at the end of the case.
struct EvenOddSets {
  EvenOddSets() {
    std::vector<int> even, odd;
    for (int r = 0; r < hvd::size(); ++r) (r % 2 == 0 ? even : odd).push_back(r);
    // At np=1 the even ranks are every rank: that is the global set (adding it again is refused).
    if (static_cast<int>(even.size()) < hvd::size()) sets[0] = hvd::add_process_set(even);
    if (!odd.empty()) sets[1] = hvd::add_process_set(odd);
  }
  ~EvenOddSets() {
    for (auto& s : sets)
      if (s.id() > 0) hvd::remove_process_set(s);
  }
  const hvd::ProcessSet& mine() const { return sets[hvd::rank() % 2]; }
  const hvd::ProcessSet& other() const { return sets[1 - hvd::rank() % 2]; }
  hvd::ProcessSet sets[2];
};

}  // namespace

TEST_CASE("hvd::torch collectives on a process set reduce and gather over its ranks only", "[process_sets]") {
  EvenOddSets s;
  const hvd::ProcessSet& set = s.mine();
  const std::vector<int> ranks = set.ranks();
  const int rank = hvd::rank();
  double rank_sum = 0;
  for (int r : ranks) rank_sum += r + 1;

  hvd::AllreduceOptions sum;
  sum.op = hvd::ReduceOp::Sum;
  sum.name = "ps.sum";
  sum.process_set = set;
  const auto reduced = ht::allreduce(torch::full({3, 2}, rank + 1.0, torch::kFloat64), sum);
  CHECK(torch::allclose(reduced, torch::full({3, 2}, rank_sum, torch::kFloat64)));

  hvd::AllgatherOptions gather;
  gather.name = "ps.gather";
  gather.process_set = set;
  // Rank r contributes r + 1 rows of value r: the result lists the set's ranks in order.
  const auto gathered = ht::allgather(torch::full({rank + 1, 2}, static_cast<double>(rank), torch::kFloat64), gather);
  std::int64_t row = 0;
  for (int r : ranks)
    for (int k = 0; k <= r; ++k, ++row) CHECK(gathered[row][1].item<double>() == r);
  CHECK(gathered.size(0) == row);

  hvd::BroadcastOptions bcast;
  bcast.root = ranks.back();  // a global rank of the set
  bcast.name = "ps.bcast";
  bcast.process_set = set;
  const auto got = ht::broadcast(torch::full({4}, rank * 10.0, torch::kFloat64), bcast);
  CHECK(torch::allclose(got, torch::full({4}, ranks.back() * 10.0, torch::kFloat64)));

  CHECK(ht::metric_average(rank + 1.0, "ps.metric", set) == Approx(rank_sum / ranks.size()));
}

TEST_CASE("the differentiable allreduce on a process set has the set's adjoint", "[process_sets]") {
  EvenOddSets s;
  const hvd::ProcessSet& set = s.mine();
  auto x = torch::full({2}, hvd::rank() + 1.0, torch::requires_grad().dtype(torch::kFloat64));
  hvd::AllreduceOptions average;
  average.name = "ps.grad";
  average.process_set = set;
  // loss_r = (rank + 1) * sum(y); dL/dx = average over the set of (rank + 1).
  auto y = ht::allreduce(x, average);
  (y.sum() * (hvd::rank() + 1.0)).backward();
  double mean = 0;
  for (int r : set.ranks()) mean += (r + 1.0) / set.size();
  CHECK(torch::allclose(x.grad(), torch::full({2}, mean, torch::kFloat64)));
}

TEST_CASE("objects and parameters are broadcast within a process set from a global root", "[process_sets]") {
  EvenOddSets s;
  const hvd::ProcessSet& set = s.mine();
  const std::vector<int> ranks = set.ranks();
  const int root = ranks.back();
  CHECK(ht::broadcast_object<std::string>("from " + std::to_string(hvd::rank()), root, "ps.obj", set) ==
        "from " + std::to_string(root));
  const auto all = ht::allgather_object<std::int64_t>(hvd::rank() * 7, "ps.objs", set);
  REQUIRE(all.size() == ranks.size());
  for (std::size_t i = 0; i < ranks.size(); ++i) CHECK(all[i] == ranks[i] * 7);

  auto model = hvd_test::make_mlp(300 + hvd::rank());
  ht::broadcast_parameters(model->named_parameters(), root, set);
  auto expected = hvd_test::make_mlp(300 + root);
  CHECK(torch::equal(hvd_test::flat(*model), hvd_test::flat(*expected)));

  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(1e-3 * (hvd::rank() + 1)));
  ht::broadcast_optimizer_state(adam, root, set);
  CHECK(static_cast<torch::optim::AdamOptions&>(adam.param_groups()[0].options()).lr() ==
        Approx(1e-3 * (root + 1)));
}

TEST_CASE("a root or a rank outside the process set is refused by name, and the set stays usable",
          "[process_sets]") {
  if (hvd::size() < 2) return;  // needs a rank outside the set
  EvenOddSets s;
  const hvd::ProcessSet& set = s.mine();
  const int outsider = s.other().ranks().front();
  auto model = hvd_test::make_mlp(1);
  const std::string root_error =
      error_of([&] { ht::broadcast_parameters(model->named_parameters(), outsider, set); });
  CHECK_THAT(root_error, Catch::Contains("root rank " + std::to_string(outsider) + " is not in " + set.describe()));
  const std::string object_error = error_of([&] { ht::broadcast_object<int>(1, outsider, "ps.bad", set); });
  CHECK_THAT(object_error, Catch::Contains("is not in " + set.describe()));

  ht::DistributedOptimizerOptions options;
  options.process_set = s.other();
  const std::string optimizer_error = error_of([&] {
    ht::DistributedOptimizer optimizer(torch::optim::SGD(model->parameters(), 0.1), model->named_parameters(), options);
  });
  CHECK_THAT(optimizer_error, Catch::Contains("rank " + std::to_string(hvd::rank()) + " is not in " +
                                              s.other().describe()));
  // The set still works after the refusals.
  CHECK(ht::metric_average(1.0, "ps.after", set) == 1.0);
}

TEST_CASE("DistributedOptimizer on a process set averages over the set", "[process_sets]") {
  EvenOddSets s;
  const hvd::ProcessSet& set = s.mine();
  auto model = hvd_test::make_mlp(21);
  auto reference = hvd_test::make_mlp(21);
  ht::DistributedOptimizerOptions options;
  options.process_set = set;
  options.name = "ps.optimizer";
  ht::DistributedOptimizer optimizer(torch::optim::SGD(model->parameters(), 0.1), model->named_parameters(), options);
  torch::optim::SGD ref_optimizer(reference->parameters(), 0.1);
  // Rank r's batch is input + r; one process on the set's union batch averages the set's losses.
  torch::manual_seed(5);
  const auto input = torch::randn({4, 8});
  optimizer.zero_grad();
  model->forward(input + hvd::rank()).pow(2).mean().backward();
  optimizer.step();
  ref_optimizer.zero_grad();
  torch::Tensor loss = torch::zeros({});
  for (int r : set.ranks()) loss = loss + reference->forward(input + r).pow(2).mean() / set.size();
  loss.backward();
  ref_optimizer.step();
  CHECK(torch::allclose(hvd_test::flat(*model), hvd_test::flat(*reference), 1e-5, 1e-6));
}
