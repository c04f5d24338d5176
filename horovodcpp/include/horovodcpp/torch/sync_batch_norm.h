// hvd::torch::SyncBatchNorm: batch normalization whose batch statistics span every rank.
// Included by horovodcpp/torch.h.
#pragma once

#include <torch/nn/cloneable.h>
#include <torch/nn/options/batchnorm.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <ostream>
#include <string>

#include "horovodcpp/horovod.h"

namespace hvd::torch {

// A drop-in for torch::nn::BatchNorm1d/2d/3d (inputs of 2 to 5 dimensions, channels in dimension
// 1). In training, the mean and variance are those of the union of every rank's batch (ranks
// may hold different batch sizes), and the backward pass differentiates through them, so a
// model trained at np=N matches one process on the union batch. Evaluation uses the running
// statistics, which every rank updates identically. Parameters and buffers carry
// BatchNorm's names (weight, bias, running_mean, running_var, num_batches_tracked), so
// checkpoints load either way.
//
// Each forward in training runs one allgather (and its backward one allreduce) named after the
// module's construction order: build SyncBatchNorm modules in the same order on every rank. At
// size 1 (or on a process set of one rank) it is plain batch normalization.
class SyncBatchNormImpl : public ::torch::nn::Cloneable<SyncBatchNormImpl> {
 public:
  explicit SyncBatchNormImpl(std::int64_t num_features)
      : SyncBatchNormImpl(::torch::nn::BatchNormOptions(num_features)) {}
  explicit SyncBatchNormImpl(const ::torch::nn::BatchNormOptions& options);
  // Statistics over the ranks of `process_set` only (a per-node or per-group batch norm).
  SyncBatchNormImpl(const ::torch::nn::BatchNormOptions& options, ProcessSet process_set);

  at::Tensor forward(const at::Tensor& input);
  void reset() override;
  void reset_running_stats();
  void reset_parameters();
  void pretty_print(std::ostream& stream) const override;

  ::torch::nn::BatchNormOptions options;
  at::Tensor weight, bias;                                     // undefined unless affine
  at::Tensor running_mean, running_var, num_batches_tracked;  // undefined unless track_running_stats
  ProcessSet process_set;  // the ranks whose batches are normalized together (default: all)

 private:
  at::Tensor batch_statistics_forward(const at::Tensor& input);
  std::string name_;  // of the statistics' collective
};
// What TORCH_MODULE(SyncBatchNorm) would declare (the macro names torch::nn unqualified, which
// inside hvd::torch means this namespace).
class SyncBatchNorm : public ::torch::nn::ModuleHolder<SyncBatchNormImpl> {
 public:
  using ::torch::nn::ModuleHolder<SyncBatchNormImpl>::ModuleHolder;
  using Impl = SyncBatchNormImpl;
};

}  // namespace hvd::torch
