// DistributedOptimizer with op Adasum against closed forms: the ranks' local updates, when
// orthogonal, add up (checked against each rank's plain optimizer simulated here), and when
// identical, give exactly one process's update (checked against one process); SGD with momentum
// and Adam, backward_passes_per_step 1 and 2, overlap DuringBackward and AfterBackward; a
// parameter frozen or unfrozen after wrapping; a process set combines its own ranks' updates
// only; and the refusals, the same on every rank.
#include <functional>
#include <iostream>
#include <memory>

#include "torch_test_util.h"

namespace ht = hvd::torch;
using hvd_test::error_of;

namespace {

constexpr int kSteps = 4;
// float32 round-off of old + (new - old) against new, over kSteps steps (measured: below 1e-7).
constexpr double kRoundoff = 1e-6;

using MakeOptimizer = std::function<std::unique_ptr<torch::optim::Optimizer>(const std::vector<torch::Tensor>&)>;

std::unique_ptr<torch::optim::Optimizer> momentum_sgd(const std::vector<torch::Tensor>& params) {
  return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(0.1).momentum(0.9));
}
std::unique_ptr<torch::optim::Optimizer> adam(const std::vector<torch::Tensor>& params) {
  return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(0.05));
}

struct Setting {
  const char* label;
  MakeOptimizer make;
  int passes;
  ht::GradientOverlap overlap;
};

std::vector<Setting> settings() {
  return {{"sgd", momentum_sgd, 1, ht::GradientOverlap::DuringBackward},
          {"sgd bpps2", momentum_sgd, 2, ht::GradientOverlap::DuringBackward},
          {"adam", adam, 1, ht::GradientOverlap::DuringBackward},
          {"adam bpps2", adam, 2, ht::GradientOverlap::DuringBackward},
          {"sgd after-backward", momentum_sgd, 1, ht::GradientOverlap::AfterBackward},
          {"adam bpps2 after-backward", adam, 2, ht::GradientOverlap::AfterBackward}};
}

ht::DistributedOptimizerOptions adasum_options(const Setting& s, const std::string& name,
                                               const hvd::ProcessSet& set = {}) {
  ht::DistributedOptimizerOptions o;
  o.op = hvd::ReduceOp::Adasum;
  o.backward_passes_per_step = s.passes;
  o.overlap = s.overlap;
  o.name = name;
  o.process_set = set;
  return o;
}

// Two parameters, the same on every rank. Element i of each belongs to global rank i % size:
// only its owner's loss touches it, so the ranks' updates are orthogonal (momentum and Adam's
// moments stay zero where the gradient is).
struct Orthogonal {
  Orthogonal() {
    w = torch::linspace(-1, 1, 8).requires_grad_();
    m = torch::linspace(0.5, -0.5, 12).reshape({4, 3}).requires_grad_();
  }
  std::vector<torch::Tensor> params() const { return {w, m}; }
  ht::NamedTensors named() const {
    ht::NamedTensors n;
    n.insert("w", w);
    n.insert("m", m);
    return n;
  }
  // Rank r's loss in pass k: sum over its elements i of c_i ((k + 1) p_i^2 / 2 + p_i), c_i > 0.
  torch::Tensor loss(int rank, int pass) const {
    torch::Tensor total = torch::zeros({});
    for (const auto& p : params()) {
      auto index = torch::arange(p.numel()).reshape(p.sizes());
      auto c = (index.remainder(hvd::size()) == rank).to(torch::kFloat) * (1 + 0.05 * index.to(torch::kFloat));
      total = total + (c * (0.5 * (pass + 1) * p * p + p)).sum();
    }
    return total;
  }
  void set(const std::vector<torch::Tensor>& values) const {
    torch::NoGradGuard no_grad;
    w.copy_(values[0]);
    m.copy_(values[1]);
  }
  std::vector<torch::Tensor> values() const { return {w.detach().clone(), m.detach().clone()}; }
  torch::Tensor w, m;
};

// Every rank's messages, joined, must be this rank's.
void check_same_everywhere(const std::vector<std::string>& errors, const std::string& name) {
  std::string joined;
  for (const auto& e : errors) joined += e + "\n";
  for (const auto& theirs : ht::allgather_object(joined, name)) CHECK(theirs == joined);
}

double max_diff(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>());
  return worst;
}

// Whether Orthogonal's m requires grad in step k, the same on every rank (empty: always).
using Schedule = std::function<bool(int step)>;

// Trains Orthogonal with Adasum over `set`, and beside it every rank of the set simulated with
// its own plain optimizer, each stepping from the combined parameters on its own loss; the
// combined update must be the sum of their updates. Returns the largest difference. With a
// schedule, m of every model requires grad in step k only where m_trains(k) (the optimizer is
// built as m_trains(0) leaves it), and gradients are reset rather than zeroed, so a plain
// optimizer skips a frozen m (LibTorch 1.x's zero_grad() zeroes, and momentum would move it): m
// must stay exactly in place while frozen and take no part, and move while it trains.
double orthogonal_against_simulated_ranks(const Setting& s, const std::string& name, const hvd::ProcessSet& set = {},
                                          const Schedule& m_trains = {}) {
  Orthogonal dist;
  std::vector<Orthogonal> simulated(set.ranks().size());
  auto set_m_trainable = [&](bool on) {
    dist.m.requires_grad_(on);
    for (auto& sim : simulated) sim.m.requires_grad_(on);
  };
  if (m_trains) set_m_trainable(m_trains(0));
  ht::DistributedOptimizer opt(s.make(dist.params()), dist.named(), adasum_options(s, name, set));
  std::vector<std::unique_ptr<torch::optim::Optimizer>> simulated_opts;
  for (const auto& sim : simulated) simulated_opts.push_back(s.make(sim.params()));
  auto combined = dist.values();
  double worst = 0;
  hvd_test::FrozenSteps frozen_steps(name + ".m", name + ".w", "adasum_requires_grad_timeline");
  for (int k = 0; k < kSteps; ++k) {
    const bool m_on = !m_trains || m_trains(k);
    INFO("step " << k << (m_on ? "" : ", m frozen"));
    if (m_on)
      frozen_steps.end();
    else
      frozen_steps.begin();
    if (m_trains) {
      set_m_trainable(m_on);
      opt.zero_grad(true);
    } else {
      opt.zero_grad();
    }
    const auto before = dist.values();
    for (int pass = 0; pass < s.passes; ++pass) dist.loss(hvd::rank(), k + pass).backward();
    // The parameters keep their values until step(), whatever the local steps did; synchronize()
    // does nothing with Adasum.
    opt.synchronize();
    CHECK(max_diff(dist.values(), before) == 0);
    const bool overlapped = s.overlap == ht::GradientOverlap::DuringBackward && set.size() > 1;
    CHECK((opt.pending_allreduces() > 0) == overlapped);
    opt.step();
    CHECK(opt.pending_allreduces() == 0);
    std::vector<torch::Tensor> sum{torch::zeros_like(combined[0]), torch::zeros_like(combined[1])};
    for (std::size_t i = 0; i < simulated.size(); ++i) {
      simulated[i].set(combined);
      if (m_trains) {
        for (const auto& p : simulated[i].params()) p.mutable_grad().reset();
      } else {
        simulated_opts[i]->zero_grad();
      }
      for (int pass = 0; pass < s.passes; ++pass) simulated[i].loss(set.ranks()[i], k + pass).backward();
      simulated_opts[i]->step();
      const auto moved = simulated[i].values();
      for (int j = 0; j < 2; ++j) sum[j] += moved[j] - combined[j];
    }
    REQUIRE(max_diff(sum, {torch::zeros_like(sum[0]), torch::zeros_like(sum[1])}) > 1e-3);  // something moved
    for (int j = 0; j < 2; ++j) combined[j] = combined[j] + sum[j];
    worst = std::max(worst, max_diff(dist.values(), combined));
    if (m_trains) {
      if (m_on)
        CHECK(!torch::equal(dist.m, before[1]));
      else
        CHECK(torch::equal(dist.m, before[1]));
    }
  }
  frozen_steps.end();
  if (hvd::rank() == set.ranks().front())
    std::cout << "[adasum orthogonal] " << name << " np=" << hvd::size() << " set of " << set.size()
              << ": max |param - sum of updates| = " << worst << std::endl;
  return worst;
}

}  // namespace

TEST_CASE("Adasum: orthogonal per-rank updates add up", "[optimizer][adasum]") {
  for (const auto& s : settings()) {
    INFO(s.label);
    CHECK(orthogonal_against_simulated_ranks(s, std::string("adasum.orthogonal.") + s.label) <= kRoundoff);
  }
}

// Fine-tuning's unfreeze: m frozen when the optimizer is built, trained from step 2 on every
// rank; its updates must be combined (not left local, nor skipped) from that step on.
TEST_CASE("Adasum: a parameter unfrozen after wrapping is combined from the next step on",
          "[optimizer][adasum][requires_grad]") {
  for (const auto& s : settings()) {
    INFO(s.label);
    CHECK(orthogonal_against_simulated_ranks(s, std::string("adasum.unfrozen.") + s.label, {},
                                             [](int k) { return k >= 2; }) <= kRoundoff);
  }
}

// m frozen on every rank after two steps, its gradient reset: no local step may move it (its
// momentum or Adam's moments would, on a zero gradient), and w goes on adding up.
TEST_CASE("Adasum: a parameter frozen after wrapping keeps its value", "[optimizer][adasum][requires_grad]") {
  for (const auto& s : settings()) {
    INFO(s.label);
    CHECK(orthogonal_against_simulated_ranks(s, std::string("adasum.frozen.") + s.label, {},
                                             [](int k) { return k < 2; }) <= kRoundoff);
  }
}

TEST_CASE("Adasum: identical updates on every rank give one process's update and state", "[optimizer][adasum]") {
  for (const auto& s : settings()) {
    INFO(s.label);
    auto model = hvd_test::make_mlp(31);
    auto reference = hvd_test::make_mlp(31);
    ht::DistributedOptimizer opt(s.make(model->parameters()), model->named_parameters(),
                                 adasum_options(s, std::string("adasum.identical.") + s.label));
    auto ref_holder = s.make(reference->parameters());
    torch::optim::Optimizer& ref_opt = *ref_holder;
    torch::manual_seed(7);  // the same data on every rank
    auto x = torch::randn({kSteps * s.passes, 4, 8});
    auto y = torch::randn({kSteps * s.passes, 4, 4});
    for (int k = 0; k < kSteps; ++k) {
      opt.zero_grad();
      ref_opt.zero_grad();
      for (int pass = 0; pass < s.passes; ++pass) {
        const int b = k * s.passes + pass;
        torch::mse_loss(model->forward(x[b]), y[b]).backward();
        torch::mse_loss(reference->forward(x[b]), y[b]).backward();
      }
      opt.step();
      ref_opt.step();
    }
    const double diff = hvd_test::max_abs_diff(*model, *reference);
    if (hvd::rank() == 0)
      std::cout << "[adasum identical] " << s.label << " np=" << hvd::size() << ": max |param - one process| = " << diff
                << std::endl;
    CHECK(diff <= kRoundoff);
    // Stepping one parameter at a time leaves the optimizer's state as whole steps do.
    auto params = model->parameters();
    auto ref_params = reference->parameters();
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (std::string(s.label).rfind("adam", 0) == 0) {
        auto* mine = hvd_test::param_state<torch::optim::AdamParamState>(opt, params[i]);
        auto* ref = hvd_test::param_state<torch::optim::AdamParamState>(ref_opt, ref_params[i]);
        REQUIRE(mine != nullptr);
        CHECK(mine->step() == kSteps);
        CHECK(torch::allclose(mine->exp_avg(), ref->exp_avg(), 1e-5, 1e-7));
        CHECK(torch::allclose(mine->exp_avg_sq(), ref->exp_avg_sq(), 1e-5, 1e-9));
      } else {
        auto* mine = hvd_test::param_state<torch::optim::SGDParamState>(opt, params[i]);
        auto* ref = hvd_test::param_state<torch::optim::SGDParamState>(ref_opt, ref_params[i]);
        REQUIRE(mine != nullptr);
        CHECK(torch::allclose(mine->momentum_buffer(), ref->momentum_buffer(), 1e-5, 1e-7));
      }
    }
  }
}

TEST_CASE("Adasum of CUDA parameters: identical updates give one process's update", "[optimizer][adasum][cuda]") {
  if (!hvd_test::cuda_case_runs()) {
    SUCCEED("no CUDA device here");
    return;
  }
  // The changes are device tensors: the node's average on NCCL, then Adasum across the nodes
  // (README, "Adasum"); identical changes come out unchanged either way.
  torch::Device device(torch::kCUDA, hvd::local_rank() % static_cast<int>(torch::cuda::device_count()));
  auto model = hvd_test::make_mlp(37);
  auto reference = hvd_test::make_mlp(37);
  model->to(device);
  const Setting s{"sgd", momentum_sgd, 1, ht::GradientOverlap::DuringBackward};
  ht::DistributedOptimizer opt(s.make(model->parameters()), model->named_parameters(),
                               adasum_options(s, "adasum.cuda"));
  auto ref_opt = s.make(reference->parameters());
  torch::manual_seed(11);  // the same data on every rank
  auto x = torch::randn({kSteps, 4, 8});
  auto y = torch::randn({kSteps, 4, 4});
  for (int k = 0; k < kSteps; ++k) {
    opt.zero_grad();
    ref_opt->zero_grad();
    torch::mse_loss(model->forward(x[k].to(device)), y[k].to(device)).backward();
    torch::mse_loss(reference->forward(x[k]), y[k]).backward();
    opt.step();
    ref_opt->step();
  }
  auto mine = model->parameters();
  auto ref = reference->parameters();
  for (std::size_t i = 0; i < mine.size(); ++i)
    CHECK(mine[i].cpu().allclose(ref[i], 1e-5, 1e-5));  // GPU against CPU arithmetic
}

TEST_CASE("Adasum: gradients changed between backward() and step() count with AfterBackward only",
          "[optimizer][adasum]") {
  for (auto overlap : {ht::GradientOverlap::DuringBackward, ht::GradientOverlap::AfterBackward}) {
    const bool after = overlap == ht::GradientOverlap::AfterBackward;
    INFO("after backward " << after);
    Orthogonal dist;
    Setting s{"clip", momentum_sgd, 1, overlap};
    ht::DistributedOptimizer opt(s.make(dist.params()), dist.named(),
                                 adasum_options(s, after ? "adasum.clip.after" : "adasum.clip.during"));
    const auto before = dist.values();
    dist.loss(hvd::rank(), 0).backward();
    for (const auto& p : dist.params()) p.grad().zero_();  // clipped to nothing
    opt.step();
    // At size 1 the wrapped optimizer steps in step(), as AfterBackward does.
    const bool stepped_in_backward = !after && hvd::size() > 1;
    CHECK((max_diff(dist.values(), before) > 1e-3) == stepped_in_backward);
  }
}

TEST_CASE("Adasum on a process set combines the set's updates only; other sizes are refused",
          "[optimizer][adasum][process_sets]") {
  if (hvd::size() < 4) return;  // needs two sets of two ranks, and one of three
  std::vector<int> even, odd, three{0, 1, 2};
  for (int r = 0; r < hvd::size(); ++r) (r % 2 == 0 ? even : odd).push_back(r);
  const hvd::ProcessSet sets[2] = {hvd::add_process_set(even), hvd::add_process_set(odd)};
  const hvd::ProcessSet& mine = sets[hvd::rank() % 2];
  for (const auto& s : settings()) {
    INFO(s.label);
    CHECK(orthogonal_against_simulated_ranks(s, std::string("adasum.set.") + s.label, mine) <= kRoundoff);
  }
  const hvd::ProcessSet odd_size = hvd::add_process_set(three);
  if (odd_size.included()) {
    Orthogonal dist;
    ht::DistributedOptimizerOptions o;
    o.op = hvd::ReduceOp::Adasum;
    o.process_set = odd_size;
    CHECK_THAT(error_of([&] { ht::DistributedOptimizer(momentum_sgd(dist.params()), dist.named(), o); }),
               Catch::Equals("DistributedOptimizer (op Adasum): Adasum needs a power-of-two number of ranks, and " +
                             odd_size.describe() + " (the DistributedOptimizerOptions::process_set) has 3"));
  }
  hvd::remove_process_set(odd_size);
  for (const auto& set : sets) hvd::remove_process_set(set);
}

TEST_CASE("Adasum refuses what it cannot do, with the same message on every rank", "[optimizer][adasum][errors]") {
  Orthogonal dist;
  ht::DistributedOptimizerOptions o;
  o.op = hvd::ReduceOp::Adasum;
  std::vector<std::string> errors;
  o.gradient_predivide_factor = 2.0;
  errors.push_back(error_of([&] { ht::DistributedOptimizer(momentum_sgd(dist.params()), dist.named(), o); }));
  CHECK_THAT(errors.back(), Catch::Contains("gradient_predivide_factor 2.000000 needs op Average"));
  o.gradient_predivide_factor = 1.0;
  errors.push_back(
      error_of([&] { ht::DistributedOptimizer(torch::optim::LBFGS(dist.params()), dist.named(), o); }));
  CHECK_THAT(errors.back(), Catch::Contains("DistributedOptimizer (op Adasum): LBFGS cannot be wrapped"));
  auto z = torch::zeros({2}, torch::kComplexFloat).requires_grad_();
  ht::NamedTensors named;
  named.insert("z", z);
  errors.push_back(error_of([&] { ht::DistributedOptimizer(torch::optim::SGD({z}, 0.1), named, o); }));
  CHECK(errors.back() ==
        "DistributedOptimizer (op Adasum): parameter 'z' is ComplexFloat; Adasum combines float16, bfloat16, "
        "float32 and float64 tensors only");
  check_same_everywhere(errors, "adasum.refusals");
}

// An optimizer that cannot forget a local step refuses zero_grad() and a pass too many; the step
// after the refusal is the one the passes before it asked for (the twin's, stepped normally).
TEST_CASE("Adasum refuses zero_grad() and extra passes once a local step is due", "[optimizer][adasum][errors]") {
  if (hvd::size() == 1) return;  // no hooks at size 1: the wrapped optimizer steps in step()
  for (auto overlap : {ht::GradientOverlap::DuringBackward, ht::GradientOverlap::AfterBackward}) {
    const bool after = overlap == ht::GradientOverlap::AfterBackward;
    INFO("after backward " << after);
    Setting s{"refusals", adam, 1, overlap};
    Orthogonal dist, twin;
    ht::DistributedOptimizer opt(s.make(dist.params()), dist.named(), adasum_options(s, "adasum.refusals"));
    ht::DistributedOptimizer twin_opt(s.make(twin.params()), twin.named(), adasum_options(s, "adasum.twin"));
    std::vector<std::string> errors;
    dist.loss(hvd::rank(), 0).backward();
    errors.push_back(error_of([&] { opt.zero_grad(); }));
    CHECK(errors.back() ==
          "DistributedOptimizer::zero_grad() (op Adasum): 2 parameter(s), first 'w', completed "
          "backward_passes_per_step 1 backward pass(es) since the last step(), so their local step is taken or "
          "due and cannot be forgotten; call step() before zero_grad()");
    errors.push_back(error_of([&] { dist.loss(hvd::rank(), 1).backward(); }));
    CHECK_THAT(errors.back(),
               Catch::Contains("DistributedOptimizer (op Adasum): parameter '") &&
                   Catch::Contains("' got a gradient after its 1 backward pass(es) of this step were complete "
                                   "(backward_passes_per_step 1), before step(); raise backward_passes_per_step"));
    check_same_everywhere(errors, after ? "adasum.zero.after" : "adasum.zero.during");
    // The refused pass added to the gradients; with AfterBackward the local step has not read
    // them yet, so the twin gets the same two passes.
    twin.loss(hvd::rank(), 0).backward();
    if (after) {
      for (std::size_t i = 0; i < 2; ++i) {
        torch::NoGradGuard no_grad;
        twin.params()[i].grad().copy_(dist.params()[i].grad());
      }
    }
    opt.step();
    twin_opt.step();
    CHECK(max_diff(dist.values(), twin.values()) == 0);
    CHECK(max_diff(dist.values(), Orthogonal().values()) > 1e-3);
    // Stepped: zero_grad() and the next pass are fine again.
    CHECK(error_of([&] { opt.zero_grad(); }).empty());
    dist.loss(hvd::rank(), 0).backward();
    opt.step();
  }
}
