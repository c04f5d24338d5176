// The autotuner's sampling, trials, CSV log and search, driven by a simulated job: each cycle
// completes one step's tensors and takes a time that depends on the parameters in effect.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "core/parameter_manager.h"

using namespace hvd::detail;
using Clock = ParameterManager::Clock;

namespace {

std::string temp_path(const std::string& tag) {
  return "/tmp/hvd_parameter_manager_" + tag + "_" + std::to_string(getpid()) + ".csv";
}

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> fields;
  std::stringstream s(line);
  for (std::string f; std::getline(s, f, ',');) fields.push_back(f);
  return fields;
}

// The keys the Runtime passes for a cycle's tensor names.
std::vector<std::size_t> keys(const std::vector<std::string>& names) {
  std::vector<std::size_t> out;
  for (const auto& name : names) out.push_back(ParameterManager::name_key(name));
  return out;
}

// A simulated job: one cycle per step completing tensors a and b (`bytes` in all), lasting
// `seconds(parameters in effect)`. Decisions apply from the next cycle, as the Controller does.
struct SimulatedJob {
  ParameterManager& tuner;
  TunableParameters in_effect;
  Clock::time_point now = Clock::time_point{} + std::chrono::hours(1);
  int proposals = 0;

  template <typename Seconds>
  void run(int steps, std::int64_t bytes, Seconds seconds) {
    for (int s = 0; s < steps; ++s) {
      auto next = tuner.record(keys({"a", "b"}), bytes, now);
      now += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds(in_effect)));
      if (next) in_effect = *next, ++proposals;
    }
  }
};

}  // namespace

TEST_CASE("samples span whole steps; warmups are discarded; each sample is one CSV line", "[autotune]") {
  const std::string path = temp_path("log");
  AutotuneOptions options;
  options.warmup_samples = 1;
  options.steps_per_sample = 2;
  options.max_samples = 3;
  options.log_path = path;
  const TunableParameters initial{65536, 1, true};
  ParameterManager tuner(options, initial);
  SimulatedJob job{tuner, initial};
  // 1000 bytes per 10 ms step: 100000 bytes/s whatever the parameters.
  job.run(100, 1000, [](const TunableParameters&) { return 0.010; });
  CHECK(tuner.done());
  CHECK(tuner.trials() == 3);
  // All scores tie: the user's settings stay, directly or after a confirmation that ties too.
  CHECK(tuner.best() == initial);
  CHECK(job.in_effect == initial);
  const auto lines = read_lines(path);
  REQUIRE(lines.size() >= 4);
  CHECK(lines[0] == ParameterManager::kLogHeader);
  CHECK(job.proposals == static_cast<int>(lines.size()) - 1);  // one per sample: the next, or the decision
  CHECK((lines.size() == 4 || lines.size() == 4 + 2 * ParameterManager::kConfirmPairs));
  // Trial 1 measured the user's settings.
  CHECK(split(lines[1]) == std::vector<std::string>{"1", "65536", "1", "1", "100000", "2", "0.020000", "search"});
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const auto f = split(lines[i]);
    REQUIRE(f.size() == 8);
    CHECK(f[0] == std::to_string(i));
    CHECK(std::stod(f[4]) == Approx(100000).epsilon(1e-6));
    CHECK(f[7] == (i <= 3 ? "search" : "confirm"));
  }
  CHECK(split(lines[2])[1] != "65536");  // the next trials moved
  std::remove(path.c_str());
}

TEST_CASE("the confirmation keeps a candidate only when it is faster than the user's settings by the margin",
          "[autotune]") {
  // The user's settings take 10 ms a step. The search's second trial ran once on a lucky quiet
  // machine (3x its true speed), so the model rates it best; its true step time decides.
  for (const auto& [candidate_seconds, kept_candidate] :
       std::vector<std::pair<double, bool>>{{0.011, false}, {0.0098, false}, {0.008, true}}) {
    INFO("candidate step " << candidate_seconds << " s against 0.010 s");
    const std::string path = temp_path("confirm");
    AutotuneOptions options;
    options.warmup_samples = 0;
    options.steps_per_sample = 2;
    options.max_samples = 4;
    options.log_path = path;
    const TunableParameters initial{65536, 1, true};
    ParameterManager tuner(options, initial);
    SimulatedJob job{tuner, initial};
    const TunableParameters lucky = tuner.denormalize({0.7, 0.0, 1.0});  // the first design point
    const double c = candidate_seconds;
    job.run(100, 1000, [&](const TunableParameters& p) {
      if (p == initial) return 0.010;
      if (p == lucky) return job.proposals < options.max_samples ? c / 3 : c;
      return 0.012;
    });
    REQUIRE(tuner.done());
    const auto lines = read_lines(path);
    REQUIRE(lines.size() == 1 + 4 + 2 * ParameterManager::kConfirmPairs);
    CHECK(split(lines[2])[1] == std::to_string(lucky.fusion_threshold_bytes));
    for (int k = 0; k < 2 * ParameterManager::kConfirmPairs; ++k) {
      const auto f = split(lines[5 + k]);
      INFO(lines[5 + k]);
      CHECK(f[7] == "confirm");
      // Pairs: the candidate (the lucky trial), then the user's settings.
      CHECK(std::stoll(f[1]) == (k % 2 == 0 ? lucky : initial).fusion_threshold_bytes);
    }
    const TunableParameters expected = kept_candidate ? lucky : initial;
    CHECK(tuner.best() == expected);
    CHECK(job.in_effect == expected);
    // The median of the kept parameters' confirmation samples.
    CHECK(tuner.best_score() == Approx(1000 / (kept_candidate ? c : 0.010)).epsilon(1e-6));
    std::remove(path.c_str());
  }
}

TEST_CASE("a step spread over several cycles counts once; the score is bytes over wall time", "[autotune]") {
  AutotuneOptions options;
  options.warmup_samples = 0;
  options.steps_per_sample = 3;
  options.max_samples = 1;
  ParameterManager tuner(options, {1 << 20, 2, true});
  auto now = Clock::time_point{} + std::chrono::hours(1);
  std::optional<TunableParameters> decided;
  // Each step: tensor x (300 bytes), then y and z (700 bytes) in a later cycle, 4 ms apart.
  for (int step = 0; step < 6 && !decided; ++step) {
    for (const auto& [names, bytes] : std::vector<std::pair<std::vector<std::string>, std::int64_t>>{
             {{"x"}, 300}, {{"y", "z"}, 700}}) {
      decided = tuner.record(keys(names), bytes, now);
      now += std::chrono::milliseconds(4);
      if (decided) break;
    }
  }
  REQUIRE(decided.has_value());
  CHECK(tuner.trials() == 1);
  // 3 steps of 1000 bytes in 3 x 8 ms.
  CHECK(tuner.best_score() == Approx(3000 / 0.024).epsilon(1e-9));
  CHECK(*decided == TunableParameters{1 << 20, 2, true});  // the only trial is the best
}

TEST_CASE("the tuner settles on the best parameters of a simulated job", "[autotune]") {
  // Throughput peaks at a 4 MB threshold and 1 ms cycle, falls off with the log distance, and
  // is 20% better with the cache on; 64 KB (the start) is far from the peak.
  auto step_seconds = [](const TunableParameters& p) {
    const double fusion = std::log2(static_cast<double>(p.fusion_threshold_bytes)) - 22;
    const double cycle = std::log2(p.cycle_time_ms);
    const double throughput = (p.cache_enabled ? 1.2 : 1.0) * (0.2 + std::exp(-(fusion * fusion + cycle * cycle) / 8));
    return 0.01 / throughput;
  };
  AutotuneOptions options;
  options.warmup_samples = 1;
  options.steps_per_sample = 2;
  options.max_samples = 20;
  const TunableParameters initial{65536, 1, true};
  ParameterManager tuner(options, initial);
  SimulatedJob job{tuner, initial};
  job.run(200, 1000, step_seconds);
  REQUIRE(tuner.done());
  CHECK(tuner.trials() == 20);
  CHECK(job.proposals == 20 + 2 * ParameterManager::kConfirmPairs);  // the candidate is confirmed
  const double best_possible = 1000 / step_seconds({1 << 22, 1, true});
  const double start = 1000 / step_seconds(initial);
  INFO("start " << start << " B/s, best possible " << best_possible << " B/s, chosen " << describe(tuner.best()));
  CHECK(start < 0.5 * best_possible);
  CHECK(tuner.best_score() >= 0.9 * best_possible);
  CHECK(job.in_effect == tuner.best());  // what the job runs with once tuning is over
  // Done: nothing more is proposed.
  job.run(20, 1000, step_seconds);
  CHECK(job.proposals == 20 + 2 * ParameterManager::kConfirmPairs);
}

TEST_CASE("search coordinates: normalize and denormalize agree; values are readable", "[autotune]") {
  AutotuneOptions options;
  ParameterManager tuner(options, {65536, 1, true});
  for (const TunableParameters p : {TunableParameters{65536, 1, true}, TunableParameters{1 << 20, 10, false},
                                    TunableParameters{128 << 20, 25, true}}) {
    INFO(describe(p));
    CHECK(tuner.denormalize(tuner.normalize(p)) == p);
  }
  const auto mid = tuner.denormalize({0.5, 0.5, 0.3});
  CHECK(mid.fusion_threshold_bytes % 1024 == 0);
  CHECK(mid.cycle_time_ms == 5);  // the log-scale middle of 1..25 ms
  CHECK_FALSE(mid.cache_enabled);
  // Without cache capacity the cache is not a dimension and stays off.
  options.cache_tunable = false;
  ParameterManager no_cache(options, {65536, 1, true});
  CHECK(no_cache.normalize({65536, 1, true}).size() == 2);
  CHECK_FALSE(no_cache.current().cache_enabled);
  CHECK_FALSE(no_cache.denormalize({0.5, 0.5, 1.0}).cache_enabled);
}

TEST_CASE("no trials asked for: the user's settings stay", "[autotune]") {
  AutotuneOptions options;
  options.max_samples = 0;
  ParameterManager tuner(options, {65536, 1, true});
  CHECK(tuner.done());
  SimulatedJob job{tuner, {65536, 1, true}};
  job.run(100, 1000, [](const TunableParameters&) { return 0.01; });
  CHECK(job.proposals == 0);
}

TEST_CASE("an unwritable HOROVOD_AUTOTUNE_LOG is an error naming the variable, path and reason", "[autotune]") {
  AutotuneOptions options;
  options.log_path = "/nonexistent-dir/tune.csv";
  CHECK_THROWS_WITH(ParameterManager(options, {65536, 1, true}),
                    "HOROVOD_AUTOTUNE_LOG='/nonexistent-dir/tune.csv': cannot open the file for writing "
                    "(No such file or directory)");
}

TEST_CASE("tuned parameters survive the wire; corrupt bytes are refused", "[autotune][codec]") {
  const TunableParameters p{123456789, 2.75, false};
  CHECK(decode_tunable_parameters(encode(p)) == p);
  auto bytes = encode(p);
  bytes.pop_back();
  CHECK_THROWS_WITH(decode_tunable_parameters(bytes), Catch::Contains("16 bytes, expected 17"));
  auto negative = encode(TunableParameters{-5, 1, true});
  CHECK_THROWS_WITH(decode_tunable_parameters(negative), Catch::Contains("fusion threshold -5 bytes"));
  auto zero_cycle = encode(TunableParameters{5, 0, true});
  CHECK_THROWS_WITH(decode_tunable_parameters(zero_cycle), Catch::Contains("cycle time 0 ms"));
}
