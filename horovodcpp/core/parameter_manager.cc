#include "core/parameter_manager.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "core/logging.h"
#include "timeline/output_file.h"
#include "horovodcpp/horovod.h"

namespace hvd::detail {
namespace {

// Search ranges, as log2 of the bounds (fusion 64 KB .. 128 MB, cycle time 1 .. 100 ms).
constexpr double kMinFusionLog2 = 16, kMaxFusionLog2 = 27;
// The cycle time only holds back bursts that keep streaming (cycles start on demand), so long
// ones can only cost: 25 ms bounds the search.
constexpr double kMinCycleMs = 1, kMaxCycleMs = 25;

// The trials after the user's own settings, before the model chooses (normalized fusion, cycle,
// cache): a spread over the space, so the first fit sees its shape rather than one corner.
const std::vector<std::vector<double>> kInitialDesign = {
    {0.7, 0.0, 1.0},
    {1.0, 0.15, 1.0},
    {0.4, 0.3, 0.0},
};

double fraction(double v, double lo, double hi) { return std::clamp((v - lo) / (hi - lo), 0.0, 1.0); }

}  // namespace

AutotuneOptions autotune_options(const Settings& s) {
  AutotuneOptions o;
  o.warmup_samples = s.autotune_warmup_samples;
  o.steps_per_sample = s.autotune_steps_per_sample;
  o.max_samples = s.autotune_bayes_opt_max_samples;
  o.noise = s.autotune_gaussian_process_noise;
  o.log_path = s.autotune_log_path;
  o.cache_tunable = s.cache_capacity > 0;
  return o;
}

ParameterManager::ParameterManager(AutotuneOptions options, TunableParameters initial)
    : options_(std::move(options)),
      optimizer_(options_.cache_tunable ? 3 : 2, options_.noise),
      initial_(initial),
      current_(initial),
      best_(initial),
      warmup_left_(options_.warmup_samples) {
  if (!options_.cache_tunable) initial_.cache_enabled = current_.cache_enabled = best_.cache_enabled = false;
  if (options_.max_samples == 0) done_ = true;  // no trials: the user's settings stay
  if (options_.log_path.empty()) return;
  // See Note [Output files are never followed through links].
  std::string why;
  const int fd = open_output_file(options_.log_path, &why);
  if (fd < 0) throw Error("HOROVOD_AUTOTUNE_LOG=" + why);
  log_.reset(::fdopen(fd, "w"));
  if (!log_) {
    const int saved = errno;
    ::close(fd);
    throw Error("HOROVOD_AUTOTUNE_LOG='" + options_.log_path + "': cannot open the file for writing (" +
                std::strerror(saved) + ")");
  }
  std::fprintf(log_.get(), "%s\n", kLogHeader);
  std::fflush(log_.get());
}

std::vector<double> ParameterManager::normalize(const TunableParameters& p) const {
  const double fusion_log2 = std::log2(std::max<double>(1.0, static_cast<double>(p.fusion_threshold_bytes)));
  std::vector<double> x = {fraction(fusion_log2, kMinFusionLog2, kMaxFusionLog2),
                           fraction(std::log(p.cycle_time_ms), std::log(kMinCycleMs), std::log(kMaxCycleMs))};
  if (options_.cache_tunable) x.push_back(p.cache_enabled ? 1.0 : 0.0);
  return x;
}

TunableParameters ParameterManager::denormalize(const std::vector<double>& x) const {
  TunableParameters p;
  const double fusion_log2 = kMinFusionLog2 + std::clamp(x.at(0), 0.0, 1.0) * (kMaxFusionLog2 - kMinFusionLog2);
  // Whole kilobytes and hundredths of a millisecond: values a person can read and set by hand.
  p.fusion_threshold_bytes = std::llround(std::exp2(fusion_log2) / 1024.0) * 1024;
  const double cycle = std::exp(std::log(kMinCycleMs) + std::clamp(x.at(1), 0.0, 1.0) * std::log(kMaxCycleMs / kMinCycleMs));
  p.cycle_time_ms = std::max(kMinCycleMs, std::round(cycle * 100) / 100);
  p.cache_enabled = options_.cache_tunable && x.size() > 2 && x[2] >= 0.5;
  return p;
}

std::optional<TunableParameters> ParameterManager::record(const std::vector<std::size_t>& name_keys,
                                                          std::int64_t bytes, Clock::time_point cycle_start) {
  if (done_ || name_keys.empty()) return std::nullopt;
  const bool boundary = std::any_of(name_keys.begin(), name_keys.end(),
                                    [&](std::size_t key) { return step_keys_.count(key) > 0; });
  std::optional<TunableParameters> next;
  if (boundary) {
    step_keys_.clear();  // keeps its buckets: no allocation per step once warm
    if (measuring_ && ++sample_steps_ >= options_.steps_per_sample) {
      const double seconds = std::chrono::duration<double>(cycle_start - sample_start_).count();
      next = finish_sample(seconds > 0 ? static_cast<double>(sample_bytes_) / seconds : 0.0, seconds);
      measuring_ = false;
    }
    // New parameters apply from the next cycle, so the step starting here ran partly under the
    // old ones: their sample starts at the next boundary. Otherwise a sample starts here.
    if (!measuring_ && !next && !done_) {
      measuring_ = true;
      sample_steps_ = 0;
      sample_start_ = cycle_start;
      sample_bytes_ = 0;
    }
  }
  step_keys_.insert(name_keys.begin(), name_keys.end());
  if (measuring_) sample_bytes_ += bytes;
  return next;
}

std::optional<TunableParameters> ParameterManager::finish_sample(double score, double seconds) {
  sample_steps_ = 0;
  if (warmup_left_ > 0) {
    --warmup_left_;
    log_debug("autotune: warmup sample discarded (" + describe(current_) + ", " + std::to_string(score) + " bytes/s)");
    return std::nullopt;
  }
  if (confirming()) {
    write_sample(current_, score, seconds, "confirm");
    return finish_confirmation_sample(score);
  }
  trials_.push_back(score);
  tried_.push_back(current_);
  write_sample(current_, score, seconds, "search");
  optimizer_.add_sample(normalize(current_), score);
  if (static_cast<std::int64_t>(trials_.size()) >= options_.max_samples) return finish_search();
  const std::size_t design = trials_.size() - 1;  // trial 1 measured the user's settings
  std::vector<double> x = design < kInitialDesign.size() ? kInitialDesign[design] : optimizer_.next_sample();
  x.resize(options_.cache_tunable ? 3 : 2);
  current_ = denormalize(x);
  return current_;
}

std::optional<TunableParameters> ParameterManager::finish_search() {
  // The trial the model rates best, not the single highest score: on a shared machine one
  // sample can be lucky by more than the parameters matter.
  const std::size_t chosen = optimizer_.best_observed_by_model();
  if (tried_[chosen] == initial_) return keep(initial_, trials_[chosen]);
  candidate_ = tried_[chosen];
  current_ = candidate_;
  return current_;
}

std::optional<TunableParameters> ParameterManager::finish_confirmation_sample(double score) {
  (current_ == candidate_ ? candidate_scores_ : initial_scores_).push_back(score);
  if (static_cast<int>(initial_scores_.size()) < kConfirmPairs) {
    current_ = current_ == candidate_ ? initial_ : candidate_;
    return current_;
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::vector<double> ratios;
  for (std::size_t k = 0; k < initial_scores_.size(); ++k)
    ratios.push_back(initial_scores_[k] > 0 ? candidate_scores_[k] / initial_scores_[k] : 0.0);
  const double ratio = median(ratios);
  std::ostringstream line;
  line << "autotune: confirmation: " << describe(candidate_) << " against the starting " << describe(initial_)
       << ", median paired ratio " << ratio << " (needs " << kConfirmMargin << ")";
  log_info(line.str());
  return ratio >= kConfirmMargin ? keep(candidate_, median(candidate_scores_)) : keep(initial_, median(initial_scores_));
}

TunableParameters ParameterManager::keep(const TunableParameters& p, double score) {
  done_ = true;
  best_ = p;
  best_score_ = score;
  current_ = best_;
  std::ostringstream line;
  line << "autotune: done after " << trials_.size() << " trials; keeping " << describe(best_) << " (" << best_score_
       << " bytes/s)";
  log_info(line.str());
  return best_;
}

void ParameterManager::write_sample(const TunableParameters& p, double score, double seconds, const char* phase) {
  std::ostringstream line;
  line << ++logged_ << ',' << p.fusion_threshold_bytes << ',' << p.cycle_time_ms << ',' << (p.cache_enabled ? 1 : 0)
       << ',' << std::fixed;
  line.precision(0);
  line << score << ',' << options_.steps_per_sample << ',';
  line.precision(6);
  line << seconds << ',' << phase;
  log_info("autotune: trial " + line.str());
  if (log_) {
    std::fprintf(log_.get(), "%s\n", line.str().c_str());
    std::fflush(log_.get());
  }
}

}  // namespace hvd::detail
