// Bayesian optimization of a noisy score over [0,1]^d: a Gaussian process models the scores seen,
// and the next point to try is the one with the largest expected improvement over the best
// score, found by a deterministic search over seeded random candidates (the same seed gives the
// same proposals, so runs are reproducible). Used by the ParameterManager on rank 0 only.
#pragma once

#include <cstdint>
#include <vector>

#include "core/gaussian_process.h"

namespace hvd::detail {

// SplitMix64: a small generator whose sequence is the same on every platform and library
// (std::uniform_real_distribution's is not).
class SeededRandom {
 public:
  explicit SeededRandom(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();
  double uniform();  // in [0, 1)

 private:
  std::uint64_t state_;
};

class BayesianOptimizer {
 public:
  static constexpr std::uint64_t kDefaultSeed = 0x68766463707021;  // any fixed value
  static constexpr int kCandidates = 2000;

  BayesianOptimizer(std::size_t dimensions, double noise, std::uint64_t seed = kDefaultSeed);

  // One observation; x is normalized to [0,1]^d (values outside are clamped).
  void add_sample(std::vector<double> x, double score);
  // The candidate with the largest expected improvement (the first point drawn when nothing was
  // observed yet).
  std::vector<double> next_sample();
  // Expected improvement at x over the best score seen, under the current model.
  double expected_improvement(const std::vector<double>& x) const;

  // The observed point the model rates highest (index in add_sample order): a single lucky
  // measurement counts less than what its neighbours and the noise say.
  std::size_t best_observed_by_model() const;
  std::size_t samples() const { return scores_.size(); }
  const GaussianProcess& model() const { return model_; }

 private:
  std::vector<double> random_point();

  std::size_t dimensions_;
  GaussianProcess model_;
  SeededRandom random_;
  std::vector<std::vector<double>> points_;
  std::vector<double> scores_;
};

}  // namespace hvd::detail
