// What this build of horovodcpp contains (hvdrun --check-build, --version), from the CMake
// configuration hvdrun was compiled with.
#pragma once

#include <string>

namespace hvd::launcher {

struct BuildInfo {
  std::string version;
  bool mpi = true;
  bool nccl = false;
  bool cuda = false;
  bool torch = false;
  bool timeline = true;
};

BuildInfo build_info();
// Horovod's layout: frameworks, controllers, tensor operations, each marked [X] or [ ].
std::string check_build_report(const BuildInfo& info);

}  // namespace hvd::launcher
