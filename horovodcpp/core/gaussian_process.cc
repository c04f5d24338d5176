#include "core/gaussian_process.h"

#include <cmath>
#include <stdexcept>

namespace hvd::detail {
namespace {

// Solves L z = b (forward) for a row-major lower-triangular n x n L.
std::vector<double> forward_solve(const std::vector<double>& lower, std::size_t n, std::vector<double> b) {
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t k = 0; k < i; ++k) b[i] -= lower[i * n + k] * b[k];
    b[i] /= lower[i * n + i];
  }
  return b;
}

// Solves L^T z = b (backward).
std::vector<double> backward_solve(const std::vector<double>& lower, std::size_t n, std::vector<double> b) {
  for (std::size_t i = n; i-- > 0;) {
    for (std::size_t k = i + 1; k < n; ++k) b[i] -= lower[k * n + i] * b[k];
    b[i] /= lower[i * n + i];
  }
  return b;
}

// In-place Cholesky of a symmetric positive definite row-major matrix; the upper part is zeroed.
bool cholesky(std::vector<double>& a, std::size_t n) {
  for (std::size_t j = 0; j < n; ++j) {
    double d = a[j * n + j];
    for (std::size_t k = 0; k < j; ++k) d -= a[j * n + k] * a[j * n + k];
    if (!(d > 0)) return false;
    a[j * n + j] = std::sqrt(d);
    for (std::size_t i = j + 1; i < n; ++i) {
      double s = a[i * n + j];
      for (std::size_t k = 0; k < j; ++k) s -= a[i * n + k] * a[j * n + k];
      a[i * n + j] = s / a[j * n + j];
    }
    for (std::size_t k = j + 1; k < n; ++k) a[j * n + k] = 0;
  }
  return true;
}

}  // namespace

GaussianProcess::GaussianProcess(double length_scale, double noise) : length_scale_(length_scale), noise_(noise) {
  if (!(length_scale > 0)) throw std::invalid_argument("GaussianProcess: length scale must be > 0");
  if (!(noise >= 0)) throw std::invalid_argument("GaussianProcess: noise must be >= 0");
}

double GaussianProcess::kernel(const std::vector<double>& a, const std::vector<double>& b) const {
  double d2 = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d2 += (a[i] - b[i]) * (a[i] - b[i]);
  return std::exp(-0.5 * d2 / (length_scale_ * length_scale_));
}

void GaussianProcess::fit(std::vector<std::vector<double>> points, std::vector<double> scores) {
  if (points.size() != scores.size()) throw std::invalid_argument("GaussianProcess: one score per point");
  points_ = std::move(points);
  const std::size_t n = points_.size();
  score_mean_ = 0;
  for (double s : scores) score_mean_ += s;
  if (n > 0) score_mean_ /= static_cast<double>(n);
  double variance = 0;
  for (double s : scores) variance += (s - score_mean_) * (s - score_mean_);
  if (n > 1) variance /= static_cast<double>(n - 1);
  // Equal scores (or one) carry no scale: keep the mean's magnitude, so predictions stay finite.
  score_scale_ = variance > 0 ? std::sqrt(variance) : std::max(std::abs(score_mean_), 1.0);
  std::vector<double> y(n);
  for (std::size_t i = 0; i < n; ++i) y[i] = (scores[i] - score_mean_) / score_scale_;

  // A small jitter keeps the factorization stable when the noise is 0 and points repeat.
  double jitter = noise_ * noise_ + 1e-9;
  while (true) {
    lower_.assign(n * n, 0);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j) lower_[i * n + j] = kernel(points_[i], points_[j]) + (i == j ? jitter : 0);
    if (cholesky(lower_, n)) break;
    jitter *= 10;
  }
  alpha_ = backward_solve(lower_, n, forward_solve(lower_, n, y));
}

GaussianProcess::Prediction GaussianProcess::predict(const std::vector<double>& x) const {
  const std::size_t n = points_.size();
  if (n == 0) return {0, 1};
  std::vector<double> k(n);
  for (std::size_t i = 0; i < n; ++i) k[i] = kernel(points_[i], x);
  double mean = 0;
  for (std::size_t i = 0; i < n; ++i) mean += k[i] * alpha_[i];
  const std::vector<double> v = forward_solve(lower_, n, k);
  double variance = kernel(x, x);
  for (double e : v) variance -= e * e;
  return {score_mean_ + mean * score_scale_, std::sqrt(std::max(variance, 0.0)) * score_scale_};
}

}  // namespace hvd::detail
