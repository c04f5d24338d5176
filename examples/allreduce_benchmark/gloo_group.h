// LibTorch's own c10d ProcessGroupGloo, set up the way a LibTorch user would: a c10d store for
// the rendezvous (a FileStore whose path rank 0 picks and broadcasts over MPI) and one Gloo
// device (loopback when every rank is on one node, else the host's address). The peer that the
// benchmarks put beside horovodcpp. Created and used by a benchmark's main thread.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace hvd::bench {

class GlooGroup {
 public:
  // Collective over `comm`: every rank must construct it.
  GlooGroup(MPI_Comm comm, bool all_on_one_node);
  ~GlooGroup();
  GlooGroup(const GlooGroup&) = delete;
  GlooGroup& operator=(const GlooGroup&) = delete;

  // Sum in place and wait, one tensor (c10d's allreduce on a one-tensor list).
  void allreduce(at::Tensor& tensor);
  // Issues one allreduce per tensor, then waits for all (Gloo runs them in issue order).
  void allreduce_all_then_wait(std::vector<at::Tensor>& tensors);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hvd::bench
