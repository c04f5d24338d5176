#include "check_build.h"

namespace hvd::launcher {
namespace {

std::string mark(bool built) { return built ? "    [X] " : "    [ ] "; }

}  // namespace

BuildInfo build_info() {
  BuildInfo info;
  info.version = HVD_VERSION_STRING;
  info.mpi = true;  // the runtime requires MPI
  info.nccl = HVD_BUILT_CUDA;
  info.cuda = HVD_BUILT_CUDA;
  info.torch = HVD_BUILT_TORCH;
  info.timeline = true;  // the recorder is always part of libhorovodcpp
  return info;
}

std::string check_build_report(const BuildInfo& info) {
  std::string out = "horovodcpp v" + info.version + ":\n\n";
  out += "Available Frameworks:\n" + mark(info.torch) + "LibTorch (C++)\n\n";
  out += "Available Controllers:\n" + mark(info.mpi) + "MPI\n\n";
  out += "Available Tensor Operations:\n" + mark(info.nccl) + "NCCL\n" + mark(info.mpi) + "MPI\n\n";
  out += "Available Devices:\n" + mark(true) + "CPU\n" + mark(info.cuda) + "CUDA\n\n";
  out += "Available Tools:\n" + mark(info.timeline) + "Timeline\n";
  return out;
}

}  // namespace hvd::launcher
