#include "core/bayesian_optimization.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace hvd::detail {
namespace {

// The RBF width over normalized inputs: a sample informs about a fifth of each range around it.
constexpr double kLengthScale = 0.2;
// Candidates drawn in a box of this half-width around the best point: refinement near it.
constexpr double kLocalRadius = 0.1;

double normal_pdf(double z) { return std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI); }
double normal_cdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

}  // namespace

std::uint64_t SeededRandom::next() {
  std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double SeededRandom::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

BayesianOptimizer::BayesianOptimizer(std::size_t dimensions, double noise, std::uint64_t seed)
    : dimensions_(dimensions), model_(kLengthScale, noise), random_(seed) {
  if (dimensions == 0) throw std::invalid_argument("BayesianOptimizer: at least one dimension");
}

void BayesianOptimizer::add_sample(std::vector<double> x, double score) {
  if (x.size() != dimensions_) throw std::invalid_argument("BayesianOptimizer: point of the wrong dimension");
  for (double& v : x) v = std::clamp(v, 0.0, 1.0);
  points_.push_back(std::move(x));
  scores_.push_back(score);
  model_.fit(points_, scores_);
}

std::vector<double> BayesianOptimizer::random_point() {
  std::vector<double> x(dimensions_);
  for (double& v : x) v = random_.uniform();
  return x;
}

double BayesianOptimizer::expected_improvement(const std::vector<double>& x) const {
  if (scores_.empty()) return 0;
  const double best = *std::max_element(scores_.begin(), scores_.end());
  const auto p = model_.predict(x);
  if (p.stddev <= 0) return std::max(p.mean - best, 0.0);
  const double z = (p.mean - best) / p.stddev;
  return (p.mean - best) * normal_cdf(z) + p.stddev * normal_pdf(z);
}

std::size_t BayesianOptimizer::best_observed_by_model() const {
  std::size_t best = 0;
  double best_mean = -1e300;
  for (std::size_t i = 0; i < points_.size(); ++i) {
    const double mean = model_.predict(points_[i]).mean;
    if (mean > best_mean) best_mean = mean, best = i;
  }
  return best;
}

std::vector<double> BayesianOptimizer::next_sample() {
  if (scores_.empty()) return random_point();
  const auto best_at = static_cast<std::size_t>(std::max_element(scores_.begin(), scores_.end()) - scores_.begin());
  std::vector<double> chosen;
  double chosen_ei = -1;
  for (int i = 0; i < kCandidates; ++i) {
    std::vector<double> x = random_point();
    if (i % 4 == 0) {  // every fourth candidate refines around the best point seen
      for (std::size_t d = 0; d < dimensions_; ++d)
        x[d] = std::clamp(points_[best_at][d] + (2 * x[d] - 1) * kLocalRadius, 0.0, 1.0);
    }
    const double ei = expected_improvement(x);
    if (ei > chosen_ei) chosen_ei = ei, chosen = std::move(x);
  }
  return chosen;
}

}  // namespace hvd::detail
