// The declaration of every HOROVOD_* setting, the one place its default is written. A new
// setting is one entry here plus its member in Settings (settings.h); read_settings, the
// agreement check, hvdrun's flag and --help follow from the entry.
#include "core/settings.h"

namespace hvd::detail {

const std::vector<SettingSpec>& setting_specs() {
  using K = SettingKind;
  constexpr SettingScope kShared = SettingScope::Shared, kPerRank = SettingScope::PerRank;
  // A function-local static: Settings() reads it, possibly during another file's static init.
  static const std::vector<SettingSpec> kSpecs = {
      {"HOROVOD_FUSION_THRESHOLD", "fusion-threshold-mb", K::Bytes, &Settings::fusion_threshold_bytes,
       "134217728", "", kShared,
       "Fuse tensors into one collective up to this many bytes (0 disables fusion)."},
      {"HOROVOD_CYCLE_TIME", "cycle-time-ms", K::Milliseconds, &Settings::cycle_time_ms,
       "1", "", kShared,
       "Longest a rank holds back a negotiation cycle while a burst of submissions keeps arriving, "
       "in milliseconds (cycles start on demand; a lone tensor does not wait for it)."},
      {"HOROVOD_CACHE_CAPACITY", "cache-capacity", K::Count, &Settings::cache_capacity,
       "1024", "", kShared,
       "Responses remembered so repeated tensors skip negotiation (0 disables the cache)."},
      {"HOROVOD_TIMELINE", "timeline-filename", K::Path, &Settings::timeline_path,
       "", "", kPerRank,
       "Write a Chrome-trace timeline of every operation to this file (DYNAMIC: no file until "
       "hvd::start_timeline())."},
      {"HOROVOD_TIMELINE_MARK_CYCLES", "timeline-mark-cycles", K::Flag, &Settings::timeline_mark_cycles,
       "0", "", kPerRank,
       "Mark each background cycle in the timeline."},
      {"HOROVOD_TIMELINE_ALL_RANKS", "timeline-all-ranks", K::Flag, &Settings::timeline_all_ranks,
       "0", "", kPerRank,
       "Every rank records its own timeline to PATH.rankN (rank 0 alone otherwise)."},
      {"HOROVOD_STALL_CHECK_DISABLE", "no-stall-check", K::Flag, &Settings::stall_check_disabled,
       "0", "", kPerRank,
       "Disable the stall inspector."},
      {"HOROVOD_STALL_CHECK_TIME_SECONDS", "stall-check-warning-time-seconds", K::Seconds,
       &Settings::stall_check_seconds, "60", "", kPerRank,
       "Warn when some ranks submitted a tensor and others have not for this long."},
      {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "stall-check-shutdown-time-seconds", K::Seconds,
       &Settings::stall_shutdown_seconds, "0", "", kPerRank,
       "Fail every rank when a stall lasts this long (0: warn only)."},
      {"HOROVOD_LIVENESS_TIMEOUT_SECONDS", "liveness-timeout-seconds", K::Seconds,
       &Settings::liveness_timeout_seconds, "1800", "", kPerRank,  // c10d's default collective timeout
       "End the job when a background cycle waits this long for ranks that stopped running (0: never)."},
      {"HOROVOD_START_TIMEOUT", "", K::Seconds, &Settings::start_timeout_seconds,
       "30", "", kPerRank,  // Horovod's default
       "hvd::init() fails, naming the late ranks, when not every rank reaches it within this time "
       "(0: wait without limit; hvdrun --start-timeout sets it)."},
      {"HOROVOD_HIERARCHICAL_ALLREDUCE", "hierarchical-allreduce", K::Flag, &Settings::hierarchical_allreduce,
       "0", "", kShared,
       "Allreduce within each node, then across nodes, then within each node again."},
      {"HOROVOD_AUTOTUNE", "autotune", K::Flag, &Settings::autotune,
       "0", "", kShared,
       "Tune the fusion threshold, cycle time and response cache while training (rank 0 decides)."},
      {"HOROVOD_AUTOTUNE_LOG", "autotune-log-file", K::Path, &Settings::autotune_log_path,
       "", "", kPerRank,
       "Autotune: write one CSV line per trial (parameters and score) to this file on rank 0."},
      {"HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "autotune-warmup-samples", K::Count, &Settings::autotune_warmup_samples,
       "3", "", kPerRank,  // Horovod's default
       "Autotune: samples discarded before the first trial."},
      {"HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "autotune-steps-per-sample", K::Count,
       &Settings::autotune_steps_per_sample, "10", "", kPerRank,  // Horovod's default
       "Autotune: training steps (every tensor reduced once) measured per sample.", 1},
      {"HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "autotune-bayes-opt-max-samples", K::Count,
       &Settings::autotune_bayes_opt_max_samples, "20", "", kPerRank,  // Horovod's default
       "Autotune: trials before settling on the best parameters seen."},
      {"HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "autotune-gaussian-process-noise", K::Number,
       &Settings::autotune_gaussian_process_noise, "0.8", "", kPerRank,  // Horovod's default
       "Autotune: noise of the scores in the Bayesian optimizer's model (relative to their spread)."},
      {"HOROVOD_LOG_LEVEL", "log-level", K::Choice, &Settings::log_level,
       "warning", "trace,debug,info,warning,error,fatal", kPerRank,
       "Runtime log level."},
      {"HOROVOD_LOG_HIDE_TIME", "log-without-timestamp", K::Flag, &Settings::log_hide_time,
       "0", "", kPerRank,
       "Leave the time of day out of the runtime's log lines."},
      {"HOROVOD_CPU_OPERATIONS", "", K::Choice, &Settings::cpu_operations,
       "", "mpi", kShared,
       "Backend for host tensors (unset: chosen automatically)."},
      {"HOROVOD_GPU_OPERATIONS", "", K::Choice, &Settings::gpu_operations,
       "", "nccl,mpi", kShared,
       "Backend for GPU tensors (unset: chosen automatically, NCCL when built)."},
      {"HOROVOD_DYNAMIC_PROCESS_SETS", "dynamic-process-sets", K::Flag, &Settings::dynamic_process_sets,
       "0", "", kShared,
       "Allow hvd::add_process_set() and hvd::remove_process_set() after hvd::init() (every rank "
       "calls them in the same order)."},
      {"HOROVOD_ELASTIC_JOB", "", K::Path, &Settings::elastic_job,
       "", "", kPerRank,
       "Elastic jobs: the job's name, which names its commit store; hvdrun's elastic driver sets it, the "
       "same for every relaunch (unset: a name unique to the run)."},
      {"HOROVOD_ELASTIC_DIR", "", K::Path, &Settings::elastic_dir,
       "", "", kPerRank,
       "Elastic jobs: the folder of this host's commit store (unset: $TMPDIR/horovodcpp-elastic/JOB); "
       "point a new run at it to resume from its newest commit."},
  };
  return kSpecs;
}

}  // namespace hvd::detail
