// State helpers: broadcast_parameters, broadcast_optimizer_state (Adam's moments, step count and
// options), object broadcast/allgather, metric averaging, and a checkpoint saved at one world
// size that resumes at another (the [.checkpoint_*] cases, selected by HVD_TEST_SPEC).
#include <cstdlib>

#include "torch_test_util.h"

namespace ht = hvd::torch;
using hvd_test::make_mlp;

namespace {

using hvd_test::error_of;

struct Pod {
  std::int32_t a;
  double b;
};

std::string checkpoint_dir() {
  const char* dir = std::getenv("HVD_TEST_CHECKPOINT_DIR");
  return dir ? dir : ".";
}

// Trains `model` with Adam for `steps` steps on rank-dependent data.
void train_adam(hvd_test::Mlp& model, torch::optim::Optimizer& adam, int steps, int rank) {
  for (int k = 0; k < steps; ++k) {
    adam.zero_grad();
    model->forward(torch::randn({4, 8}) + rank).pow(2).mean().backward();
    adam.step();
  }
}

}  // namespace

TEST_CASE("broadcast_parameters overwrites every parameter and buffer with root's", "[state]") {
  const int size = hvd::size();
  const int rank = hvd::rank();
  const int root = size - 1;
  torch::nn::Sequential model(torch::nn::Linear(3, 5), torch::nn::BatchNorm1d(5), torch::nn::Linear(5, 2));
  {
    torch::NoGradGuard no_grad;
    int i = 0;
    for (auto& p : model->parameters()) p.fill_((rank + 1) * (++i));
    for (auto& b : model->buffers()) b.fill_(rank + 10);
  }
  ht::broadcast_parameters(*model, root);  // parameters and buffers
  int i = 0;
  for (auto& p : model->parameters()) CHECK(torch::all(p == (root + 1) * (++i)).item<bool>());
  for (auto& b : model->buffers()) CHECK(torch::all(b == root + 10).item<bool>());
  // Parameters only, and a non-contiguous one.
  auto w = torch::full({4, 3}, static_cast<float>(rank)).t();
  ht::NamedTensors named;
  named.insert("w", w);
  ht::broadcast_parameters(named, 0);
  CHECK(torch::all(w == 0).item<bool>());
}

TEST_CASE("broadcast_parameters with different tensors on some rank fails on every rank", "[state][errors]") {
  const int size = hvd::size();
  const int rank = hvd::rank();
  if (size == 1) return;
  ht::NamedTensors named;
  named.insert("a", torch::ones({2}));
  if (rank == 1) named.insert("extra", torch::ones({2}));
  CHECK_THAT(error_of([&] { ht::broadcast_parameters(named, 0); }),
             Catch::Contains("broadcast_parameters: rank(s) 1 hold tensors whose names, dtypes or shapes differ "
                             "from root rank 0's"));
}

TEST_CASE("broadcast_optimizer_state copies Adam's moments, step count and options", "[state]") {
  const int size = hvd::size();
  const int rank = hvd::rank();
  auto model = make_mlp(31);
  ht::broadcast_parameters(model->named_parameters(), 0);
  torch::manual_seed(100 + rank);
  // Root trains 2 steps; rank 1 not at all (empty state); others rank-1 steps; lr differs.
  const int steps = rank == 0 ? 2 : rank - 1;
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(1e-3 * (rank + 1)).betas({0.8, 0.9 + 0.01 * rank}));
  train_adam(model, adam, steps, rank);
  ht::DistributedOptimizer dist(std::move(adam), model->named_parameters());
  ht::broadcast_optimizer_state(dist, 0);
  auto& inner = dist.optimizer();
  auto& options = static_cast<torch::optim::AdamOptions&>(inner.param_groups().at(0).options());
  CHECK(options.lr() == 1e-3);
  CHECK(std::get<1>(options.betas()) == 0.9);
  int index = 0;
  for (const auto& p : model->parameters()) {
    auto* state = hvd_test::param_state<torch::optim::AdamParamState>(inner, p);
    REQUIRE(state != nullptr);
    CHECK(state->step() == 2);
    const std::string name = "adam.check." + std::to_string(index++);
    CHECK(torch::equal(state->exp_avg(), ht::broadcast(state->exp_avg(), {0, name + ".m"})));
    CHECK(torch::equal(state->exp_avg_sq(), ht::broadcast(state->exp_avg_sq(), {0, name + ".v"})));
    CHECK(state->exp_avg().abs().sum().item<double>() > 0);  // root's moments are not zeros
  }
  (void)size;
}

TEST_CASE("broadcast_optimizer_state copies SGD momentum buffers and the learning rate", "[state]") {
  const int rank = hvd::rank();
  auto model = make_mlp(32);
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.5 + rank).momentum(0.9));
  sgd.zero_grad();
  model->forward(torch::ones({2, 8}) * (rank + 1)).sum().backward();
  sgd.step();
  ht::broadcast_optimizer_state(sgd, 0);
  CHECK(sgd.param_groups()[0].options().get_lr() == 0.5);
  for (const auto& p : model->parameters()) {
    auto* state = hvd_test::param_state<torch::optim::SGDParamState>(sgd, p);
    REQUIRE(state != nullptr);
    CHECK(torch::equal(state->momentum_buffer(), ht::broadcast(state->momentum_buffer(), {0, "sgd.check"})));
  }
}

TEST_CASE("broadcast_object and allgather_object move strings, PODs and IValues", "[state]") {
  const int size = hvd::size();
  const int rank = hvd::rank();
  const int root = size - 1;
  CHECK(ht::broadcast_object(std::string("from rank ") + std::to_string(rank), root) ==
        "from rank " + std::to_string(root));
  CHECK(ht::broadcast_object(std::string(), 0, "empty").empty());
  Pod pod{rank, rank * 0.5};
  Pod got = ht::broadcast_object(pod, root, "pod");
  CHECK(got.a == root);
  CHECK(got.b == root * 0.5);
  std::vector<std::int64_t> list = {rank, rank * rank, 7};
  const std::vector<std::int64_t> expected = {root, root * root, 7};
  CHECK(ht::broadcast_object(list, root, "list") == expected);
  auto tensor = ht::broadcast_object(torch::full({2, 2}, static_cast<double>(rank)), root, "tensor");
  CHECK(torch::equal(tensor, torch::full({2, 2}, static_cast<double>(root))));
  auto strings = ht::allgather_object(std::string(rank, static_cast<char>('a' + rank)), "strings");
  REQUIRE(static_cast<int>(strings.size()) == size);
  for (int r = 0; r < size; ++r) CHECK(strings[r] == std::string(r, static_cast<char>('a' + r)));
  auto values = ht::allgather_object(rank * 1.5);
  for (int r = 0; r < size; ++r) CHECK(values[r] == r * 1.5);
  CHECK(ht::metric_average(rank + 1.0, "metric") == Approx((size + 1) / 2.0));
}

TEST_CASE("state helpers reject a root out of range", "[state][errors]") {
  const int size = hvd::size();
  auto model = make_mlp(1);
  torch::optim::SGD sgd(model->parameters(), 0.1);
  const std::string range = " is out of range [0, " + std::to_string(size) + ")";
  CHECK_THAT(error_of([&] { ht::broadcast_parameters(model->named_parameters(), size); }),
             Catch::Contains("broadcast_parameters: root rank " + std::to_string(size) + range));
  CHECK_THAT(error_of([&] { ht::broadcast_optimizer_state(sgd, -1); }),
             Catch::Contains("broadcast_optimizer_state: root rank -1" + range));
  CHECK_THAT(error_of([&] { ht::broadcast_object(std::string("x"), size + 3); }),
             Catch::Contains("broadcast_object: root rank " + std::to_string(size + 3) + range));
  ht::NamedTensors named;
  named.insert("nothing", torch::Tensor());
  CHECK_THAT(error_of([&] { ht::broadcast_parameters(named, 0); }),
             Catch::Contains("broadcast_parameters: tensor 'nothing' is undefined"));
}

// Root rank 0 against every other rank: every rank must throw (none may be left waiting), the
// message names the differing ranks and both descriptions, and the runtime still works.
TEST_CASE("an optimizer unlike root's is reported on every rank", "[state][errors]") {
  const int size = hvd::size();
  const int rank = hvd::rank();
  if (size == 1) return;
  std::string others;  // "1" or "1, 2, 3"
  for (int r = 1; r < size; ++r) others += (r == 1 ? "" : ", ") + std::to_string(r);
  const std::string prefix = "broadcast_optimizer_state: rank(s) " + others + " hold an optimizer unlike root rank 0's";
  auto model = make_mlp(2);
  auto params = model->parameters();
  SECTION("other param groups") {
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(std::vector<torch::Tensor>(params.begin(), params.begin() + 2));
    if (rank == 0) groups.emplace_back(std::vector<torch::Tensor>(params.begin() + 2, params.end()));
    torch::optim::SGD sgd(groups, 0.1);
    const std::string error = error_of([&] { ht::broadcast_optimizer_state(sgd, 0); });
    CHECK_THAT(error, Catch::Contains(prefix));
    CHECK_THAT(error, Catch::Contains("root rank 0 has torch::optim::SGD with 2 param group(s) of 2, 4 parameter(s)"));
    CHECK_THAT(error, Catch::Contains("rank 1 has torch::optim::SGD with 1 param group(s) of 2 parameter(s)"));
  }
  SECTION("another optimizer class") {
    std::unique_ptr<torch::optim::Optimizer> opt;
    if (rank == 0) opt = std::make_unique<torch::optim::Adam>(params, 0.1);
    else opt = std::make_unique<torch::optim::SGD>(params, 0.1);
    const std::string error = error_of([&] { ht::broadcast_optimizer_state(*opt, 0); });
    CHECK_THAT(error, Catch::Contains(prefix));
    CHECK_THAT(error, Catch::Contains("root rank 0 has torch::optim::Adam with 1 param group(s) of 6 parameter(s)"));
    CHECK_THAT(error, Catch::Contains("rank 1 has torch::optim::SGD with 1 param group(s) of 6 parameter(s)"));
  }
  SECTION("other parameter shapes") {
    torch::nn::Linear layer(rank == 0 ? 3 : 4, 2);  // same counts, other weight shape
    torch::optim::SGD sgd(layer->parameters(), 0.1);
    const std::string error = error_of([&] { ht::broadcast_optimizer_state(sgd, 0); });
    CHECK_THAT(error, Catch::Contains(prefix));
    CHECK_THAT(error, Catch::Contains("dtypes/shapes hash"));
  }
  // Nothing was left half-sent: the next collective sees every rank.
  CHECK(ht::metric_average(rank + 1.0, "after.optimizer_mismatch") == Approx((size + 1) / 2.0));
}

TEST_CASE("objects of another size on some rank are reported with the ranks", "[state][errors]") {
  const int size = hvd::size();
  const int rank = hvd::rank();
  if (size == 1) return;
  // Root sends an int32; the other ranks expect an int64, or a float of the same size: every
  // rank, root included, gets the same error naming the ranks and both types.
  for (const bool same_size : {false, true}) {
    INFO((same_size ? "float" : "int64"));
    const std::string name = same_size ? "mixed.float" : "mixed";
    const std::string expected = same_size ? "float" : "long";
    std::string error = rank == 0 ? error_of([&] { ht::broadcast_object<std::int32_t>(7, 0, name); })
                        : same_size ? error_of([&] { ht::broadcast_object<float>(7, 0, name); })
                                    : error_of([&] { ht::broadcast_object<std::int64_t>(7, 0, name); });
    CHECK_THAT(error, Catch::Contains("broadcast_object of '" + name + "': failed on rank(s) 1"));
    CHECK_THAT(error, Catch::Contains("root rank 0 sent a int but this rank expects a " + expected));
  }
  // Every rank decodes every rank's value, so every rank sees the mismatch.
  std::string error = rank == 0 ? error_of([] { ht::allgather_object<std::int32_t>(7, "mixed.all"); })
                                : error_of([] { ht::allgather_object<std::int64_t>(7, "mixed.all"); });
  if (rank == 0)
    CHECK_THAT(error, Catch::Contains("allgather_object of 'mixed.all': rank 1 sent a long but this rank expects a int"));
  else
    CHECK_THAT(error, Catch::Contains("allgather_object of 'mixed.all': rank 0 sent a int but this rank expects a long"));
  CHECK(ht::metric_average(rank + 1.0, "after.object_mismatch") == Approx((size + 1) / 2.0));
}

// Saves a checkpoint (rank 0 only) after training at this world size.
TEST_CASE("checkpoint: save after training", "[.checkpoint_save]") {
  const int rank = hvd::rank();
  auto model = make_mlp(41);
  ht::broadcast_parameters(model->named_parameters(), 0);
  ht::DistributedOptimizer opt(torch::optim::Adam(model->parameters(), 0.01), model->named_parameters());
  torch::manual_seed(200 + rank);
  for (int k = 0; k < 3; ++k) {
    opt.zero_grad();
    model->forward(torch::randn({4, 8})).pow(2).mean().backward();
    opt.step();
  }
  if (rank == 0) {
    torch::save(model, checkpoint_dir() + "/torch_test_model.pt");
    torch::save(opt.optimizer(), checkpoint_dir() + "/torch_test_optimizer.pt");
  }
  hvd::barrier();
  auto mine = torch::cat({model->fc1->weight.reshape({-1}), model->fc3->bias});
  CHECK(torch::equal(ht::broadcast(mine, {0, "checkpoint.saved"}), mine));
}

// Resumes that checkpoint at another world size: rank 0 loads, everyone receives.
TEST_CASE("checkpoint: resume at another world size", "[.checkpoint_resume]") {
  const int rank = hvd::rank();
  auto model = make_mlp(99);  // different initial values on purpose
  torch::optim::Adam adam(model->parameters(), 0.01);
  if (rank == 0) {
    torch::load(model, checkpoint_dir() + "/torch_test_model.pt");
    torch::load(adam, checkpoint_dir() + "/torch_test_optimizer.pt");
  }
  ht::broadcast_parameters(model->named_parameters(), 0);
  ht::DistributedOptimizer opt(std::move(adam), model->named_parameters());
  ht::broadcast_optimizer_state(opt, 0);
  // Every rank reads the file itself and compares: identical parameters, 3 Adam steps.
  auto saved = make_mlp(7);
  torch::load(saved, checkpoint_dir() + "/torch_test_model.pt");
  CHECK(hvd_test::max_abs_diff(*model, *saved) == 0.0);
  for (const auto& p : model->parameters()) {
    auto* state = hvd_test::param_state<torch::optim::AdamParamState>(opt.optimizer(), p);
    REQUIRE(state != nullptr);
    CHECK(state->step() == 3);
  }
  // Training continues in lockstep.
  opt.zero_grad();
  model->forward(torch::randn({4, 8}) + rank).pow(2).mean().backward();
  opt.step();
  auto mine = torch::cat({model->fc1->weight.reshape({-1}), model->fc3->bias}).detach();
  CHECK(torch::equal(ht::broadcast(mine, {0, "checkpoint.resumed"}), mine));
}
