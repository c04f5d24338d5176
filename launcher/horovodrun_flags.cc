#include "horovodrun_flags.h"

#include <CLI/CLI.hpp>

#include "core/settings.h"
#include "horovodcpp/horovod.h"
#include "shell_words.h"

namespace hvd::launcher {
namespace {

constexpr const char* kGroup = "horovodrun's other flags (accepted so its command lines run unchanged)";

// The knob flag of `env`, for messages ("--autotune").
std::string knob_flag(const std::string& env) {
  const hvd::detail::SettingSpec* spec = hvd::detail::find_setting(env);
  return spec != nullptr && spec->flag[0] != '\0' ? std::string("--") + spec->flag : env;
}

}  // namespace

void HorovodrunFlags::add_to(CLI::App& app) {
  struct SwitchSpec {
    const char* name;
    const char* env;
    const char* value;
  };
  static const SwitchSpec kSwitches[] = {
      {"--no-hierarchical-allreduce", "HOROVOD_HIERARCHICAL_ALLREDUCE", "0"},
      {"--no-autotune", "HOROVOD_AUTOTUNE", "0"},
      {"--no-timeline-mark-cycles", "HOROVOD_TIMELINE_MARK_CYCLES", "0"},
      {"--stall-check", "HOROVOD_STALL_CHECK_DISABLE", "0"},
      {"--log-with-timestamp", "HOROVOD_LOG_HIDE_TIME", "0"},
      {"--no-log-hide-timestamp", "HOROVOD_LOG_HIDE_TIME", "0"},  // Horovod's name before 0.21
      {"--log-hide-timestamp", "HOROVOD_LOG_HIDE_TIME", "1"},     // likewise
  };
  switches_.clear();
  for (const auto& s : kSwitches) {
    auto* option = app.add_flag(s.name)->group(kGroup)->description(
        std::string("Sets ") + s.env + "=" + s.value + " (the opposite of, or another name for, " +
        knob_flag(s.env) + ").");
    switches_.push_back(Switch{option, s.env, s.value});
  }

  tcp_ = app.add_flag("--tcp", "MPI traffic over TCP only: mpirun -mca pml ob1 -mca btl tcp,self.")->group(kGroup);
  binding_ = app.add_option("--binding-args", binding_args_,
                            "mpirun's process binding, instead of hvdrun's -bind-to none -map-by slot "
                            "(split into words as a shell would).")
                 ->type_name("\"ARGS\"")
                 ->group(kGroup);
  timestamp_ = app.add_flag("--prefix-output-with-timestamp",
                            "Timestamp every output line (mpirun --timestamp-output; also -prefix-timestamp).")
                   ->group(kGroup);
  app.add_flag("--mpi", "Use the MPI controller: what hvdrun always does.")->group(kGroup);
  gloo_ = app.add_flag("--gloo", "horovodcpp has no Gloo controller: the job runs over Open MPI (a warning says so).")
              ->group(kGroup);
  jsrun_ = app.add_flag("--jsrun", "Refused: hvdrun launches through mpirun (srun under Slurm); run jsrun yourself.")
               ->group(kGroup);
  config_ = app.add_option("--config-file", config_file_,
                           "Refused: hvdrun reads no YAML config file; pass its settings as flags.")
                ->type_name("FILE")
                ->group(kGroup);
  app.add_flag("--disable-cache", "horovodrun's cache of its host checks: hvdrun keeps none, so nothing changes.")
      ->group(kGroup);

  struct IgnoredSpec {
    const char* name;
    bool takes_value;
    const char* why;
  };
  static const IgnoredSpec kIgnored[] = {
      {"--num-nccl-streams", true, "horovodcpp runs its NCCL collectives on one stream per device"},
      {"--thread-affinity", true, "horovodcpp places its background thread itself (core/background_placement.h)"},
      {"--gloo-timeout-seconds", true, "horovodcpp has no Gloo controller"},
      {"--mpi-threads-disable", false, "horovodcpp's background thread needs MPI_THREAD_MULTIPLE"},
      {"--hierarchical-allgather", false, "horovodcpp's allgather has no hierarchical form"},
      {"--torus-allreduce", false, "horovodcpp has no torus allreduce (--hierarchical-allreduce is its two-level one)"},
  };
  ignored_.clear();
  for (const auto& spec : kIgnored) {
    ignored_.emplace_back();
    Ignored& entry = ignored_.back();
    entry.why = spec.why;
    const std::string help = std::string("Changes nothing (a warning says so): ") + spec.why + ".";
    entry.option = spec.takes_value ? app.add_option(spec.name, entry.value, help)->type_name("N")
                                    : app.add_flag(spec.name, help);
    entry.option->group(kGroup);
  }
  // The --no-X forms of those ask for what horovodcpp does anyway.
  for (const char* name : {"--no-mpi-threads-disable", "--no-hierarchical-allgather", "--no-torus-allreduce"})
    app.add_flag(name, "Accepted: horovodcpp does this anyway.")->group(kGroup);
}

void HorovodrunFlags::apply(LaunchOptions& o) const {
  if (config_->count() > 0)
    throw hvd::Error("--config-file " + config_file_ +
                     ": hvdrun reads no YAML config file; pass its settings as flags (hvdrun --help lists them)");
  if (jsrun_->count() > 0)
    throw hvd::Error("--jsrun: hvdrun launches through Open MPI's mpirun (srun under Slurm); under LSF run "
                     "'jsrun ... PROGRAM' yourself: a horovodcpp program takes its ranks from any MPI launcher");
  for (const Switch& s : switches_) {
    if (s.option->count() == 0) continue;
    bool set = false;
    for (auto& [name, value] : o.knob_env) {
      if (name != s.env) continue;
      if (value != s.value)
        throw hvd::Error(s.option->get_name() + " contradicts " + knob_flag(s.env) + " (" + s.env + "=" + value +
                         "): give one of them");
      set = true;
    }
    if (!set) o.knob_env.emplace_back(s.env, s.value);
  }
  o.tcp_only = tcp_->count() > 0;
  o.timestamp_output = timestamp_->count() > 0;
  if (binding_->count() > 0) {
    o.binding_args = split_shell_words(binding_args_, "--binding-args");
    bool blank = o.binding_args.empty();
    for (const auto& word : o.binding_args) blank = blank || word.empty();
    if (blank)
      throw hvd::Error("--binding-args '" + binding_args_ +
                       "': needs mpirun binding arguments without empty words, e.g. '-bind-to core'");
  }
  if (gloo_->count() > 0)
    o.notes.push_back("--gloo: horovodcpp has no Gloo controller; the job runs over Open MPI (the results are the same)");
  for (const Ignored& entry : ignored_)
    if (entry.option->count() > 0)
      o.notes.push_back(entry.option->get_name() + (entry.value.empty() ? "" : " " + entry.value) +
                        " changes nothing: " + entry.why);
}

}  // namespace hvd::launcher
