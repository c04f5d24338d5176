"""SyncBatchNorm (Horovod's horovod.torch.SyncBatchNorm): batch normalization whose batch
statistics span every rank's batch, on the CPU or a GPU.

In training, each forward sums its batch over the ranks twice (the count and per-channel sums,
then the per-channel squared deviations from that mean), so the statistics are those of the
union batch without the cancellation of E[x^2] - E[x]^2. Both sums are differentiable allreduces
(whose gradient is again a sum over the ranks), so backward gives each rank the exact gradient of
the sum of the ranks' losses; every rank must run forward and backward together.
"""
import torch
from torch.nn.modules.batchnorm import _BatchNorm

from horovod.torch.mpi_ops import Sum, allreduce, global_process_set


class SyncBatchNorm(_BatchNorm):
    """Drop-in for torch.nn.BatchNorm{1,2,3}d whose training statistics cover every rank."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 process_set=global_process_set):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self.process_set = process_set

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError('expected at least 2D input (got {}D input)'.format(input.dim()))

    def forward(self, input):
        self._check_input_dim(input)
        if not self.training or self.process_set.size() == 1:
            return super().forward(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked)

        compute = torch.float64 if input.dtype == torch.float64 else torch.float32
        x = input.to(compute)
        channels = x.shape[1]
        dims = [0] + list(range(2, x.dim()))
        shape = [1, channels] + [1] * (x.dim() - 2)
        count = torch.tensor([x.numel() // channels], dtype=compute, device=x.device)
        sums = allreduce(torch.cat([count, x.sum(dims)]), op=Sum, process_set=self.process_set)
        total = sums[0]
        if float(total) < 2:
            raise ValueError('SyncBatchNorm: expected more than 1 value per channel over all ranks '
                             '(got input of size {} on this rank)'.format(list(input.shape)))
        mean = sums[1:] / total
        centered = x - mean.view(shape)
        var = allreduce((centered * centered).sum(dims), op=Sum, process_set=self.process_set) / total

        if self.track_running_stats:
            with torch.no_grad():
                self.running_mean.mul_(1 - factor).add_(mean.detach().to(self.running_mean.dtype), alpha=factor)
                unbiased = var.detach() * (total / (total - 1))
                self.running_var.mul_(1 - factor).add_(unbiased.to(self.running_var.dtype), alpha=factor)

        out = centered * torch.rsqrt(var + self.eps).view(shape)
        if self.affine:
            out = out * self.weight.to(compute).view(shape) + self.bias.to(compute).view(shape)
        return out.to(input.dtype)
