// Autotune on a live job (run with HOROVOD_AUTOTUNE=1, tiny warmup/steps/max-samples and
// HOROVOD_AUTOTUNE_LOG set): tuning never corrupts a result, every rank applies the same
// parameters, rank 0 logs one CSV line per sample (search, then confirmation), and the kept
// parameters follow from the log.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/bayesian_optimization.h"
#include "core/introspection.h"
#include "core/parameter_manager.h"
#include "core/settings.h"
#include "test_support.h"

using namespace hvd;

namespace {

std::int64_t env_int(const char* name) {
  const char* v = std::getenv(name);
  REQUIRE(v != nullptr);
  return std::atoll(v);
}

// Min and max of a value across ranks (one allreduce each).
std::pair<double, double> min_max(double v, const std::string& name) {
  auto lo = test::filled(DataType::Float64, {1}, [&](std::int64_t) { return v; });
  auto hi = test::filled(DataType::Float64, {1}, [&](std::int64_t) { return v; });
  allreduce_async(lo, lo, {ReduceOp::Min, name + ".min"}).wait();
  allreduce_async(hi, hi, {ReduceOp::Max, name + ".max"}).wait();
  return {test::read_as_double(*lo, 0), test::read_as_double(*hi, 0)};
}

// A "training step": eight gradients of different sizes, all submitted, then all waited for, each
// checked against its closed form: the sum over ranks r of (r+1)(i+1) + step + k%7.
void training_step(int step) {
  const int n = size(), me = rank();
  const std::vector<std::int64_t> lengths = {7, 1000, 20000, 33, 5000, 64, 12000, 300};
  std::vector<std::shared_ptr<HostTensor>> tensors;
  std::vector<Handle> handles;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    const double a = static_cast<double>(me + 1) * static_cast<double>(i + 1);
    tensors.push_back(test::filled(DataType::Float32, {lengths[i]}, [&](std::int64_t k) { return a + step + k % 7; }));
    handles.push_back(allreduce_async(tensors.back(), tensors.back(), {ReduceOp::Sum, "grad." + std::to_string(i)}));
  }
  for (auto& h : handles) h.wait();
  for (std::size_t i = 0; i < lengths.size(); ++i)
    for (std::int64_t k = 0; k < lengths[i]; ++k) {
      const double expected = (i + 1.0) * n * (n + 1) / 2 + n * (step + k % 7);
      if (test::read_as_double(*tensors[i], k) != expected) {
        FAIL("step " << step << " tensor grad." << i << " element " << k << ": " << test::read_as_double(*tensors[i], k)
                     << " != " << expected);
      }
    }
}

}  // namespace

TEST_CASE("autotune: results stay exact, ranks agree, rank 0 logs every trial", "[autotune]") {
  const std::int64_t max_samples = env_int("HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES");
  const char* log_path = std::getenv("HOROVOD_AUTOTUNE_LOG");
  REQUIRE(log_path != nullptr);
  const int me = rank();
  // Rank 0's tuner has not decided yet: nobody may impose parameters over it.
  if (me == 0)
    CHECK_THROWS_WITH(detail::request_parameters({1 << 20, 2, true}),
                      Catch::Contains("HOROVOD_AUTOTUNE=1 is still deciding"));
  // Steps until rank 0's tuner has decided (search and confirmation), and one more that applies
  // the decision everywhere; bounded, so a tuner that never decides fails the checks below.
  bool decided = false;
  for (int step = 0; step < 200 && !decided; ++step) {
    training_step(step);
    if (min_max(detail::autotune_decided() ? 1.0 : 0.0, "autotune.decided").first == 1.0)
      decided = true;
  }
  REQUIRE(decided);
  {  // the step that applies the decision on every rank
    auto t = test::filled(DataType::Float32, {8}, [](std::int64_t) { return 1.0; });
    allreduce_async(t, t, {ReduceOp::Sum, "grad.0.apply"}).wait();
  }
  const detail::TunableParameters tuned = detail::tuned_parameters();
  const auto changes = detail::controller_stats().parameter_changes;
  INFO("rank " << me << ": " << detail::describe(tuned) << ", " << changes << " change(s)");
  for (const auto& [name, value] : std::vector<std::pair<std::string, double>>{
           {"threshold", static_cast<double>(tuned.fusion_threshold_bytes)},
           {"cycle", tuned.cycle_time_ms},
           {"cache", tuned.cache_enabled ? 1.0 : 0.0},
           {"changes", static_cast<double>(changes)}}) {
    const auto [lo, hi] = min_max(value, "autotune." + name);
    INFO(name);
    CHECK(lo == hi);  // the same on every rank
  }
  if (me != 0) return;
  std::ifstream log(log_path);
  REQUIRE(log.good());
  std::vector<std::string> lines;
  for (std::string line; std::getline(log, line);) lines.push_back(line);
  REQUIRE(!lines.empty());
  CHECK(lines[0] == detail::ParameterManager::kLogHeader);
  // Every logged sample proposed the next parameters, the last one the decision.
  CHECK(changes == lines.size() - 1);
  struct Sample {
    detail::TunableParameters p;
    double score;
    std::string phase;
  };
  std::vector<Sample> samples;
  for (std::size_t t = 1; t < lines.size(); ++t) {
    std::stringstream fields(lines[t]);
    std::vector<std::string> f;
    for (std::string x; std::getline(fields, x, ',');) f.push_back(x);
    INFO(lines[t]);
    REQUIRE(f.size() == 8);
    CHECK(f[0] == std::to_string(t));
    samples.push_back({{std::stoll(f[1]), std::stod(f[2]), f[3] == "1"}, std::stod(f[4]), f[7]});
    CHECK(samples.back().score > 0);
    CHECK((f[7] == "search") == (static_cast<std::int64_t>(t) <= max_samples));  // the search comes first
  }
  REQUIRE(static_cast<std::int64_t>(samples.size()) >= max_samples);
  const detail::TunableParameters initial = samples[0].p;  // the user's settings come first
  CHECK(initial.fusion_threshold_bytes == 65536);
  // The search's candidate is the trial the model rates best (not the single highest score):
  // refit the same model from the log.
  detail::AutotuneOptions options = detail::autotune_options(detail::read_settings_from_environment());
  options.log_path.clear();
  const detail::ParameterManager coordinates(options, {});
  detail::BayesianOptimizer model(options.cache_tunable ? 3 : 2, options.noise);
  for (std::int64_t t = 0; t < max_samples; ++t) model.add_sample(coordinates.normalize(samples[t].p), samples[t].score);
  const detail::TunableParameters candidate = samples[model.best_observed_by_model()].p;
  INFO("the model's candidate: " << detail::describe(candidate));
  if (candidate == initial) {  // nothing to confirm
    CHECK(samples.size() == static_cast<std::size_t>(max_samples));
    CHECK(tuned == initial);
    return;
  }
  // Confirmation: candidate and the user's settings alternate; the candidate is kept when the
  // median of the pairs' ratios reaches the margin.
  const int pairs = detail::ParameterManager::kConfirmPairs;
  REQUIRE(samples.size() == static_cast<std::size_t>(max_samples + 2 * pairs));
  std::vector<double> for_candidate, for_initial;
  for (int k = 0; k < 2 * pairs; ++k) {
    const Sample& s = samples[max_samples + k];
    CHECK(s.p == (k % 2 == 0 ? candidate : initial));
    (k % 2 == 0 ? for_candidate : for_initial).push_back(s.score);
  }
  std::vector<double> ratios;
  for (int k = 0; k < pairs; ++k) ratios.push_back(for_candidate[k] / for_initial[k]);
  std::sort(ratios.begin(), ratios.end());
  const bool candidate_wins = ratios[pairs / 2] >= detail::ParameterManager::kConfirmMargin;
  INFO("confirmation: median paired ratio " << ratios[pairs / 2]);
  CHECK(tuned == (candidate_wins ? candidate : initial));
}

// Runs after the case above (Catch2 keeps declaration order), once the tuner has decided: what the
// autotune benchmark uses to compare settings inside one launch.
TEST_CASE("autotune: parameters requested on rank 0 take effect on every rank in one cycle", "[autotune]") {
  const int me = rank();
  REQUIRE(detail::autotune_decided());
  CHECK_THROWS_WITH(detail::request_parameters({-1, 1, true}), Catch::Contains("out of range"));
  CHECK_THROWS_WITH(detail::request_parameters({4096, 0, true}), Catch::Contains("cycle time 0 ms"));
  const detail::TunableParameters before = detail::tuned_parameters();
  // Differs from whatever the tuner kept in every field.
  const detail::TunableParameters wanted{before.fusion_threshold_bytes + 4096, before.cycle_time_ms + 2.5,
                                         !before.cache_enabled};
  detail::request_parameters(wanted);  // rank 0's counts; the others' change nothing
  const auto changes_before = detail::controller_stats().parameter_changes;
  bool applied = false;
  for (int step = 1000; step < 1050 && !applied; ++step) {
    training_step(step);  // results stay exact while the switch happens
    applied = min_max(detail::tuned_parameters() == wanted ? 1.0 : 0.0, "request.applied").first == 1.0;
  }
  INFO("rank " << me << ": " << detail::describe(detail::tuned_parameters()));
  REQUIRE(applied);
  CHECK(detail::controller_stats().parameter_changes == changes_before + 1);
  training_step(2000);  // and under the new parameters
  CHECK(detail::tuned_parameters() == wanted);
}
