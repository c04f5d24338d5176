"""alltoall: rows of a tensor sent to each rank by splits (even without), with the rows received
from each rank; differentiable (the gradient goes back along the received splits)."""
import torch

from horovod import _horovodcpp as _C
from horovod.common.process_sets import global_process_set
from horovod.torch._collectives.arguments import needs_grad, set_id
from horovod.torch._collectives.handles import FromOutputs, keep, synchronize


def _splits_list(splits):
    if splits is None:
        return []
    if isinstance(splits, torch.Tensor):
        if splits.dtype != torch.int32:
            raise ValueError("alltoall: splits must hold 32-bit integers (torch.int32), got %s" % splits.dtype)
        return splits.cpu().tolist()
    return [int(s) for s in splits]


class _Alltoall(FromOutputs):
    """How synchronize() returns an alltoall: the output and, as a tensor like the splits given
    (int32 on the CPU without), the rows received from each rank."""
    __slots__ = ("splits",)

    def __init__(self, splits):
        self.splits = splits

    def result(self, outputs, received):
        like = self.splits if isinstance(self.splits, torch.Tensor) else None
        if like is None:
            received = torch.tensor(received, dtype=torch.int32)
        else:
            received = torch.tensor(received, dtype=torch.int32, device=like.device)
        return outputs[0], received


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """Starts sending ``splits[r]`` rows of ``tensor`` (first dimension, in order) to each rank r of
    the set (an even split when None); synchronize() returns the rows received and how many came
    from each rank."""
    ps_id = set_id(process_set)
    try:
        split_list = _splits_list(splits)
    except ValueError as e:
        # The peers' handles fail with this reason instead of waiting (the core's own checks
        # withdraw by themselves; an unnamed call has no name yet).
        if name:
            _C.withdraw("alltoall." + name, "alltoall of 'alltoall.%s': %s" % (name, e), ps_id)
        raise
    handle = _C.alltoall_async(tensor, split_list, name or "", ps_id)
    keep(handle, tensor, _Alltoall(splits))
    return handle


class HorovodAlltoall(torch.autograd.Function):
    """alltoall whose gradient is the alltoall back along the received splits."""

    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        output, received_splits = synchronize(alltoall_async(tensor, splits, name, process_set))
        ctx.process_set = process_set
        ctx.received_splits = received_splits
        if splits is None:
            return output
        ctx.mark_non_differentiable(received_splits)
        return output, received_splits

    @staticmethod
    def backward(ctx, grad_output, *unused):
        grad, _ = alltoall(grad_output.contiguous(), splits=ctx.received_splits, process_set=ctx.process_set)
        return grad, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Returns the rows every rank sent this rank; with ``splits`` given, also how many came from
    each rank. Differentiable."""
    if needs_grad(tensor):
        return HorovodAlltoall.apply(tensor, splits, name, process_set)
    output, received_splits = synchronize(alltoall_async(tensor, splits, name, process_set))
    return output if splits is None else (output, received_splits)
