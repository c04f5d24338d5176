// A Gaussian-process regression model of a noisy score over points in [0,1]^d: an RBF kernel, a
// noise term on the diagonal, solved by Cholesky. Scores are standardized inside (zero mean, unit
// variance), so `noise` is relative to the spread of the scores seen. Plain data; used by the
// Bayesian optimizer on the background thread of rank 0 only.
#pragma once

#include <vector>

namespace hvd::detail {

class GaussianProcess {
 public:
  // `length_scale`: the RBF kernel's width in normalized units; `noise`: the standard deviation
  // of the observation noise in standardized score units (HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE).
  GaussianProcess(double length_scale, double noise);

  // Replaces the observations. Every point has the same dimension; inputs lie in [0,1].
  void fit(std::vector<std::vector<double>> points, std::vector<double> scores);

  struct Prediction {
    double mean = 0;    // in score units
    double stddev = 0;  // in score units
  };
  // The posterior at x; with no observations, the prior (mean 0, stddev 1).
  Prediction predict(const std::vector<double>& x) const;

  std::size_t size() const { return points_.size(); }

 private:
  double kernel(const std::vector<double>& a, const std::vector<double>& b) const;

  double length_scale_, noise_;
  std::vector<std::vector<double>> points_;
  double score_mean_ = 0, score_scale_ = 1;
  std::vector<double> lower_;  // Cholesky factor L of K + noise^2 I, row-major n x n
  std::vector<double> alpha_;  // (K + noise^2 I)^-1 y, y standardized
};

}  // namespace hvd::detail
