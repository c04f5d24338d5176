// Two data-parallel groups in one job (Horovod's process sets): the ranks split into halves,
// {0, 1} and {2, 3} at np=4 ({0} and {1} at np=2), and each half trains its own replica of a
// model on its own data at the same time: a DistributedOptimizer, a SyncBatchNorm, a
// broadcast of the initial parameters from the group's first rank and a metric average, each
// on the group's process set. Rank 0 of each group starts from a different seed, so only a
// broadcast within the group makes its replicas agree.
//
// Checks: parameters and running statistics identical within a group; each group equal to one
// process on that group's union batches (with BatchNorm1d, from the group leader's initial
// parameters); the two groups' models differ (their data differ); the averaged loss is the
// group's, not the job's.
#include "program_support.h"

namespace ht = hvd::torch;

namespace {

constexpr std::int64_t kBatch = 6;
constexpr int kSteps = 20;

struct NetImpl : torch::nn::Module {
  explicit NetImpl(torch::nn::AnyModule norm)
      : fc1(register_module("fc1", torch::nn::Linear(4, 10))),
        fc2(register_module("fc2", torch::nn::Linear(10, 1))),
        norm(std::move(norm)) {
    register_module("bn", this->norm.ptr());
  }
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::relu(norm.forward(fc1(x)))); }
  torch::nn::Linear fc1, fc2;
  torch::nn::AnyModule norm;
};
TORCH_MODULE(Net);

Net make_net(torch::nn::AnyModule norm, int seed) {
  torch::manual_seed(seed);
  return Net(std::move(norm));
}

// Returns the last step's loss on this shard.
double train(Net& model, torch::optim::Optimizer& optimizer, const programs::Shard& shard, int group) {
  torch::optim::StepLR scheduler(optimizer, /*step_size=*/5, /*gamma=*/0.7);
  model->train();
  double last = 0;
  for (int step = 0; step < kSteps; ++step) {
    torch::manual_seed(1000 * group + step);
    const auto x = torch::randn({kBatch * shard.world, 4}) * 2 + group;
    const auto y = x.sum(1, /*keepdim=*/true) * (group + 1) + 0.1 * torch::randn({kBatch * shard.world, 1});
    model->zero_grad();
    auto loss = torch::mse_loss(model->forward(shard.rows(x)), shard.rows(y));
    loss.backward();
    optimizer.step();
    scheduler.step();
    last = loss.item<double>();
  }
  return last;
}

torch::OrderedDict<std::string, torch::Tensor> state_of(Net& model) {
  torch::OrderedDict<std::string, torch::Tensor> all;
  for (const auto& item : model->named_parameters()) all.insert(item.key(), item.value());
  for (const auto& item : model->named_buffers()) all.insert(item.key(), item.value());
  return all;
}

}  // namespace

int main() {
  const char* size_text = std::getenv("OMPI_COMM_WORLD_SIZE");
  const int world = size_text != nullptr ? std::atoi(size_text) : 1;
  if (world % 2 != 0) {
    std::fprintf(stderr, "process_sets needs an even number of ranks, got %d\n", world);
    return 2;
  }
  std::vector<int> first_half, second_half;
  for (int r = 0; r < world; ++r) (r < world / 2 ? first_half : second_half).push_back(r);
  hvd::ProcessSet halves[2] = {hvd::ProcessSet(first_half), hvd::ProcessSet(second_half)};  // HVD
  hvd::init({halves[0], halves[1]});                                                          // HVD
  programs::Checks checks("process_sets");
  torch::set_default_dtype(caffe2::TypeMeta::Make<double>());

  const int group = hvd::rank() < world / 2 ? 0 : 1;
  const hvd::ProcessSet& mine = halves[group];
  const int leader = mine.ranks().front();
  const programs::Shard shard{mine.size(), mine.rank(), 1};

  auto model = make_net(torch::nn::AnyModule(ht::SyncBatchNorm(torch::nn::BatchNormOptions(10), mine)),  // HVD
                        /*seed=*/50 + hvd::rank());
  ht::DistributedOptimizerOptions options;                                   // HVD
  options.process_set = mine;                                                // HVD
  ht::DistributedOptimizer optimizer(                                        // HVD
      torch::optim::SGD(model->parameters(), torch::optim::SGDOptions(0.02).momentum(0.5)),
      model->named_parameters(), options);                                   // HVD
  ht::broadcast_parameters(*model, leader, mine);                            // HVD
  const double loss = train(model, optimizer, shard, group);
  const double group_loss = ht::metric_average(loss, "loss", mine);          // HVD

  auto reference = make_net(torch::nn::AnyModule(torch::nn::BatchNorm1d(10)), /*seed=*/50 + leader);
  torch::optim::SGD ref_optimizer(reference->parameters(), torch::optim::SGDOptions(0.02).momentum(0.5));
  train(reference, ref_optimizer, programs::Shard{mine.size(), 0, mine.size()}, group);

  // Within the group: identical replicas, equal to one process on the group's union batches.
  const auto group_state = state_of(model);
  for (const auto& item : group_state) {
    const torch::Tensor t = item.value().detach().contiguous();
    const std::string bytes(static_cast<const char*>(t.data_ptr()), static_cast<std::size_t>(t.nbytes()));
    const auto all = ht::allgather_object(bytes, "check." + item.key(), mine);
    checks.expect(static_cast<int>(all.size()) == mine.size(), "allgather_object on the group returned " +
                                                                    std::to_string(all.size()) + " values");
    for (std::size_t r = 1; r < all.size(); ++r)
      if (all[r] != all[0]) checks.fail("'" + item.key() + "' differs within group " + std::to_string(group));
  }
  checks.close(group_state, state_of(reference), 1e-9, "group " + std::to_string(group) + " vs one process");

  // Across groups: the replicas differ, and each group's averaged loss is its own.
  const auto weights = ht::allgather_object(model->fc1->weight.sum().item<double>(), "check.groups");
  const double other = weights[group == 0 ? world / 2 : 0];
  checks.expect(std::abs(weights[hvd::rank()] - other) > 1e-3,
                "the two groups ended with the same fc1 weights (sum " + std::to_string(other) + ")");
  const auto losses = ht::allgather_object(group_loss, "check.losses");
  for (int r = 0; r < world; ++r)
    if ((r < world / 2) == (group == 0))
      checks.expect(losses[r] == group_loss, "rank " + std::to_string(r) + " of the same group averaged loss " +
                                                 std::to_string(losses[r]) + ", this rank " + std::to_string(group_loss));
  checks.expect(losses[0] != losses[world / 2], "both groups averaged the same loss: the average crossed groups");
  std::printf("[process_sets] rank %d: group %d (%s), averaged loss %.6f\n", hvd::rank(), group,
              mine.describe().c_str(), group_loss);
  const int status = checks.finish();
  hvd::shutdown();                                                           // HVD
  return status;
}
