// The autotuner (HOROVOD_AUTOTUNE=1): on rank 0, measures the throughput of the live job (bytes
// reduced per second) under one set of TunableParameters at a time and picks the next set to try
// by Bayesian optimization; after HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES trials it settles on the
// best set seen and stops. It only decides: the Runtime hands each decision to the Controller,
// which carries it to every rank. Background thread of rank 0 only; owned by the Runtime.
//
// A step is what Horovod calls one: every tensor of the job reduced once. Steps are counted by
// tensor name: a cycle that completes a name already completed in the current step starts the next
// step. Names arrive as hashes (name_key): the count runs after every cycle on the thread that
// drives MPI, so it copies no strings and, once warm, allocates nothing. A sample spans
// HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE whole steps, from the cycle that starts one step to the cycle
// that starts the step after the last; its score is the bytes of the responses completed in between
// divided by the wall time in between. A sample starts only at a step boundary after the parameters
// it measures took effect. The first HOROVOD_AUTOTUNE_WARMUP_SAMPLES samples are discarded; each
// later one is a trial, written as one CSV line to HOROVOD_AUTOTUNE_LOG when set.
//
// The search space: fusion threshold 64 KB .. 128 MB and cycle time 1 .. 25 ms, each on a log
// scale, and the response cache on or off (tuned only when HOROVOD_CACHE_CAPACITY > 0). The
// first trial measures the user's own settings.
//
// After the search, the trial the model rates best (the candidate) must beat the user's own
// settings side by side: kConfirmPairs pairs of samples, candidate then user's, so a slow or
// fast minute on a shared machine hits both alike. The candidate is kept only when the median of
// the pairs' ratios (candidate / user's) reaches kConfirmMargin: a change must pay for itself
// beyond the measurement's noise, and one lucky sample must not leave a job slower than it
// started. These samples are logged too (phase "confirm"); a candidate that is the user's
// settings needs no confirmation.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/bayesian_optimization.h"
#include "core/settings.h"
#include "core/tunable_parameters.h"

namespace hvd::detail {

struct AutotuneOptions {
  std::int64_t warmup_samples = 3;
  std::int64_t steps_per_sample = 10;
  std::int64_t max_samples = 20;
  double noise = 0.8;
  std::string log_path;       // "" for no CSV log
  bool cache_tunable = true;  // false when the cache has no capacity: it stays off
};

AutotuneOptions autotune_options(const Settings& settings);

class ParameterManager {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr const char* kLogHeader =
      "trial,fusion_threshold_bytes,cycle_time_ms,cache_enabled,score_bytes_per_second,steps,seconds,phase";
  static constexpr int kConfirmPairs = 5;
  static constexpr double kConfirmMargin = 1.05;

  // Opens the CSV log (truncating it) and writes its header; throws hvd::Error naming
  // HOROVOD_AUTOTUNE_LOG and the reason when it cannot be written.
  ParameterManager(AutotuneOptions options, TunableParameters initial);

  // The key record() takes for a tensor name. Two names of one job sharing a 64-bit key would
  // end a step one tensor early: one sample a step short, not a wrong decision.
  static std::size_t name_key(const std::string& name) { return std::hash<std::string>{}(name); }

  // After a cycle's responses ran: the keys of the tensors it completed, their bytes, and when
  // the cycle started. Returns the parameters to apply next when this cycle ended a trial (the
  // next to try, or the best seen when tuning is over).
  std::optional<TunableParameters> record(const std::vector<std::size_t>& name_keys, std::int64_t bytes,
                                          Clock::time_point cycle_start);

  bool done() const { return done_; }
  int trials() const { return static_cast<int>(trials_.size()); }  // search trials measured
  const TunableParameters& current() const { return current_; }  // under measurement
  // Once done: the parameters kept (the model's best trial, or the user's settings when that
  // trial lost the confirmation) and the median of their confirmation scores (or their trial's
  // score when there was none).
  const TunableParameters& best() const { return best_; }
  double best_score() const { return best_score_; }

  // Normalized search coordinates and back (exposed for the tests).
  std::vector<double> normalize(const TunableParameters& p) const;
  TunableParameters denormalize(const std::vector<double>& x) const;

 private:
  std::optional<TunableParameters> finish_sample(double score, double seconds);
  std::optional<TunableParameters> finish_search();
  std::optional<TunableParameters> finish_confirmation_sample(double score);
  TunableParameters keep(const TunableParameters& p, double score);
  void write_sample(const TunableParameters& p, double score, double seconds, const char* phase);

  AutotuneOptions options_;
  BayesianOptimizer optimizer_;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> log_{nullptr, &std::fclose};  // HOROVOD_AUTOTUNE_LOG
  TunableParameters initial_, current_, best_;
  double best_score_ = -1;
  int logged_ = 0;  // CSV lines written after the header
  std::int64_t warmup_left_;
  std::vector<double> trials_;  // scores, in order
  std::vector<TunableParameters> tried_;  // the parameters of each trial, in order
  bool done_ = false;
  // The confirmation, once the search is over and until done: samples alternate candidate_ and
  // initial_.
  bool confirming() const {
    return !done_ && static_cast<std::int64_t>(trials_.size()) >= options_.max_samples;
  }
  TunableParameters candidate_;
  std::vector<double> candidate_scores_, initial_scores_;

  // The sample in progress.
  std::unordered_set<std::size_t> step_keys_;  // names completed in the current step
  bool measuring_ = false;                     // a sample has started (at a step boundary)
  Clock::time_point sample_start_;
  std::int64_t sample_bytes_ = 0;
  std::int64_t sample_steps_ = 0;
};

}  // namespace hvd::detail
