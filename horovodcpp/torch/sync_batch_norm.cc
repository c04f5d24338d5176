// SyncBatchNorm: each rank computes its batch's per-channel mean and variance (numerically
// stable, over its own rows), the ranks gather them, and every rank combines them into the
// union's statistics: mean = sum_r n_r m_r / n, var = sum_r n_r (v_r + (m_r - mean)^2) / n.
// The gather is differentiable, so autograd produces SyncBatchNorm's backward (its one
// allreduce is the gather's adjoint).
#include <torch/nn/init.h>

#include <atomic>

#include "autograd_ops.h"
#include "horovodcpp/torch.h"

namespace hvd::torch {
namespace {

std::string next_name() {
  static std::atomic<long long> instances{0};
  return "SyncBatchNorm." + std::to_string(instances++) + ".stats";
}

// [1, C, 1, ...] for broadcasting a per-channel vector against the input.
std::vector<std::int64_t> channel_shape(const at::Tensor& input) {
  std::vector<std::int64_t> shape(input.dim(), 1);
  shape[1] = input.size(1);
  return shape;
}

}  // namespace

SyncBatchNormImpl::SyncBatchNormImpl(const ::torch::nn::BatchNormOptions& options_) : options(options_) { reset(); }

SyncBatchNormImpl::SyncBatchNormImpl(const ::torch::nn::BatchNormOptions& options_, ProcessSet process_set_)
    : options(options_), process_set(std::move(process_set_)) {
  reset();
}

void SyncBatchNormImpl::reset() {
  name_ = next_name();
  const std::int64_t c = options.num_features();
  if (options.affine()) {
    weight = register_parameter("weight", at::empty({c}));
    bias = register_parameter("bias", at::empty({c}));
  } else {
    weight = register_parameter("weight", at::Tensor(), /*requires_grad=*/false);
    bias = register_parameter("bias", at::Tensor(), /*requires_grad=*/false);
  }
  if (options.track_running_stats()) {
    running_mean = register_buffer("running_mean", at::zeros({c}));
    running_var = register_buffer("running_var", at::ones({c}));
    num_batches_tracked = register_buffer("num_batches_tracked", at::tensor(0, at::kLong));
  } else {
    running_mean = register_buffer("running_mean", at::Tensor());
    running_var = register_buffer("running_var", at::Tensor());
    num_batches_tracked = register_buffer("num_batches_tracked", at::Tensor());
  }
  reset_parameters();
}

void SyncBatchNormImpl::reset_running_stats() {
  if (!options.track_running_stats()) return;
  running_mean.zero_();
  running_var.fill_(1);
  num_batches_tracked.zero_();
}

void SyncBatchNormImpl::reset_parameters() {
  reset_running_stats();
  if (!options.affine()) return;
  ::torch::nn::init::ones_(weight);
  ::torch::nn::init::zeros_(bias);
}

void SyncBatchNormImpl::pretty_print(std::ostream& stream) const {
  stream << "hvd::torch::SyncBatchNorm(" << options.num_features() << ", eps=" << options.eps() << ", momentum=";
  if (options.momentum().has_value())
    stream << *options.momentum();
  else
    stream << "None";
  stream << ", affine=" << options.affine() << ", track_running_stats=" << options.track_running_stats() << ")";
}

at::Tensor SyncBatchNormImpl::forward(const at::Tensor& input) {
  if (input.dim() < 2 || input.dim() > 5 || input.size(1) != options.num_features())
    throw Error("SyncBatchNorm(" + std::to_string(options.num_features()) + "): expected an input of 2 to 5 "
                "dimensions with " + std::to_string(options.num_features()) + " channels in dimension 1, got shape " +
                shape_string(TensorShape(input.sizes().begin(), input.sizes().end())));
  const bool batch_stats = is_training() || !options.track_running_stats();
  if (!batch_stats)
    return at::batch_norm(input, weight, bias, running_mean, running_var, false, 0.0, options.eps(),
                          at::globalContext().userEnabledCuDNN());
  if (is_training() && options.track_running_stats()) num_batches_tracked += 1;
  if (process_set.size() == 1) {
    const double factor = options.momentum().has_value() ? *options.momentum()
                                                         : 1.0 / num_batches_tracked.item<double>();
    return at::batch_norm(input, weight, bias, running_mean, running_var, true, factor, options.eps(),
                          at::globalContext().userEnabledCuDNN());
  }
  return batch_statistics_forward(input);
}

at::Tensor SyncBatchNormImpl::batch_statistics_forward(const at::Tensor& input) {
  const std::int64_t c = options.num_features();
  // Statistics in at least float32, as LibTorch's batch norm keeps them for half inputs.
  const at::ScalarType stats_type = at::promote_types(input.scalar_type(), at::kFloat);
  const at::Tensor x = input.to(stats_type);
  std::vector<std::int64_t> dims{0};
  for (std::int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  const std::int64_t count = c > 0 ? x.numel() / c : 0;
  at::Tensor mean, var;
  if (count > 0) {
    std::tie(var, mean) = at::var_mean(x, dims, /*unbiased=*/false);
  } else {  // an empty batch on this rank contributes nothing
    mean = x.sum(dims);
    var = x.sum(dims);
  }
  const at::Tensor row = at::cat({mean, var, at::full({1}, static_cast<double>(count), x.options())}).unsqueeze(0);
  AllgatherOptions gather;
  gather.name = name_;
  gather.process_set = process_set;
  const at::Tensor stats = detail::differentiable_allgather_uniform(row.contiguous(), gather);  // [ranks, 2C+1]
  const at::Tensor counts = stats.select(1, 2 * c).unsqueeze(1);
  const at::Tensor n = counts.sum();
  if (n.item<double>() == 0)
    throw Error("SyncBatchNorm(" + std::to_string(c) + "): every rank's batch is empty");
  const at::Tensor means = stats.narrow(1, 0, c);
  const at::Tensor union_mean = (means * counts).sum(0) / n;
  const at::Tensor union_var = ((stats.narrow(1, c, c) + (means - union_mean).pow(2)) * counts).sum(0) / n;

  if (is_training() && options.track_running_stats()) {
    ::torch::NoGradGuard no_grad;
    const double factor = options.momentum().has_value() ? *options.momentum()
                                                         : 1.0 / num_batches_tracked.item<double>();
    const double total = n.item<double>();
    const at::Tensor unbiased = union_var * (total > 1 ? total / (total - 1) : 1.0);
    running_mean.mul_(1 - factor).add_(union_mean.to(running_mean.scalar_type()), factor);
    running_var.mul_(1 - factor).add_(unbiased.to(running_var.scalar_type()), factor);
  }

  const auto shape = channel_shape(x);
  at::Tensor y = (x - union_mean.view(shape)) * at::rsqrt(union_var + options.eps()).view(shape);
  if (options.affine()) y = y * weight.view(shape) + bias.view(shape);
  return y.to(input.scalar_type());
}

}  // namespace hvd::torch
