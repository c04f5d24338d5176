// horovodrun's flags beyond hvdrun's own, so that a Horovod launch command runs unchanged
// (hvdrun is installed as horovodrun too). Main thread only, while parsing the command line.
//   - knob switches: the --no-X forms Horovod has for its on/off knobs (--no-autotune,
//     --stall-check, ...) and its older names (--log-hide-timestamp): the knob's variable;
//   - flags that become mpirun arguments: --tcp, --binding-args, -prefix-timestamp;
//   - controllers: --mpi is what hvdrun runs; --gloo runs over MPI too, with a warning (there
//     is no Gloo controller); --jsrun is refused (run jsrun yourself), and so is --config-file
//     (pass the settings as flags);
//   - settings of what horovodcpp does not have (NCCL streams, thread affinity, Gloo's timeout,
//     hierarchical allgather, torus allreduce, MPI without threads): accepted with a warning that
//     says they change nothing; their --no-X forms ask for what happens anyway: accepted quietly;
//   - --disable-cache: horovodrun's cache of its host checks; hvdrun caches none.
#pragma once

#include <deque>
#include <string>
#include <vector>

#include "launch_options.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace hvd::launcher {

class HorovodrunFlags {
 public:
  void add_to(CLI::App& app);
  // After parsing: the switches' variables into o.knob_env (a switch that contradicts a knob flag
  // given too is an error naming both), the mpirun settings, and o.notes. Throws hvd::Error.
  void apply(LaunchOptions& o) const;

 private:
  struct Switch {
    CLI::Option* option;
    const char* env;
    const char* value;
  };
  struct Ignored {
    CLI::Option* option = nullptr;
    std::string value;
    const char* why = "";
  };
  std::vector<Switch> switches_;
  std::deque<Ignored> ignored_;  // CLI11 keeps pointers to each value
  CLI::Option* tcp_ = nullptr;
  CLI::Option* timestamp_ = nullptr;
  CLI::Option* gloo_ = nullptr;
  CLI::Option* jsrun_ = nullptr;
  CLI::Option* binding_ = nullptr;
  std::string binding_args_;
  CLI::Option* config_ = nullptr;
  std::string config_file_;
};

}  // namespace hvd::launcher
