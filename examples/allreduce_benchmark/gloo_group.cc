#include "gloo_group.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#ifdef HVD_BENCH_WITH_GLOO
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif

namespace hvd::bench {

#ifdef HVD_BENCH_WITH_GLOO

struct GlooGroup::Impl {
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  std::string store_path;
  int rank = 0;
};

namespace {

// Rank 0 picks a fresh path for the FileStore; every rank learns it over MPI.
std::string shared_store_path(MPI_Comm comm, int rank) {
  char path[256] = {0};
  if (rank == 0) {
    const char* dir = std::getenv("TMPDIR");
    std::snprintf(path, sizeof path, "%s/hvd_bench_gloo_store_XXXXXX", dir != nullptr ? dir : "/tmp");
    const int fd = mkstemp(path);
    if (fd < 0) throw std::runtime_error(std::string("cannot create a c10d FileStore file at ") + path);
    close(fd);
    unlink(path);  // FileStore creates it; it must start empty
  }
  MPI_Bcast(path, sizeof path, MPI_CHAR, 0, comm);
  return path;
}

}  // namespace

GlooGroup::GlooGroup(MPI_Comm comm, bool all_on_one_node) : impl_(std::make_unique<Impl>()) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  impl_->rank = rank;
  impl_->store_path = shared_store_path(comm, rank);
  auto store = c10::make_intrusive<c10d::FileStore>(impl_->store_path, size);
  auto options = c10d::ProcessGroupGloo::Options::create();
  options->devices.push_back(all_on_one_node ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                             : c10d::ProcessGroupGloo::createDefaultDevice());
  options->threads = 2;  // what torch.distributed gives one device
  impl_->group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
  MPI_Barrier(comm);
}

// The last FileStore to close removes the file (c10d counts its users).
GlooGroup::~GlooGroup() = default;

void GlooGroup::allreduce(at::Tensor& tensor) {
  std::vector<at::Tensor> one{tensor};
  impl_->group->allreduce(one)->wait();
}

void GlooGroup::allreduce_all_then_wait(std::vector<at::Tensor>& tensors) {
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  works.reserve(tensors.size());
  for (auto& t : tensors) {
    std::vector<at::Tensor> one{t};
    works.push_back(impl_->group->allreduce(one));
  }
  for (auto& w : works) w->wait();
}

#else  // a LibTorch without Gloo's headers (PyTorch's wheels): the peer cannot be built

struct GlooGroup::Impl {};

GlooGroup::GlooGroup(MPI_Comm, bool) {
  throw std::runtime_error("c10d Gloo is not available: this LibTorch ships no Gloo headers (gloo/algorithm.h), "
                           "so the benchmarks were built without their Gloo peer");
}
GlooGroup::~GlooGroup() = default;
void GlooGroup::allreduce(at::Tensor&) {}
void GlooGroup::allreduce_all_then_wait(std::vector<at::Tensor>&) {}

#endif

}  // namespace hvd::bench
