"""broadcast: the root rank's tensor on every rank of the set, in place or not; differentiable with
Horovod's gradient."""
import torch

from horovod import _horovodcpp as _C
from horovod.common.process_sets import global_process_set
from horovod.torch._collectives.allreduce import allreduce
from horovod.torch._collectives.arguments import Average, needs_grad, set_id
from horovod.torch._collectives.handles import keep, synchronize


def _broadcast_async(tensor, output, root_rank, name, process_set):
    handle = _C.broadcast_async(tensor, output, root_rank, name or "", set_id(process_set))
    keep(handle, tensor, output)
    return handle


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts sending ``tensor`` of global rank ``root_rank`` to every rank of the set; the result
    is a new tensor (``tensor`` is not modified)."""
    output = torch.empty_like(tensor, memory_format=torch.contiguous_format)
    return _broadcast_async(tensor, output, root_rank, name, process_set)


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    """broadcast_async in place."""
    return _broadcast_async(tensor, tensor, root_rank, name, process_set)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """Overwrites ``tensor`` with root's and returns it."""
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


class HorovodBroadcast(torch.autograd.Function):
    """broadcast with Horovod's gradient: the average of the output's gradient over the ranks on
    the root, zero elsewhere."""

    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank = root_rank
        ctx.process_set = process_set
        return synchronize(broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad_reduced = allreduce(grad_output.contiguous(), op=Average, process_set=ctx.process_set)
        if _C.rank() != ctx.root_rank:
            grad_reduced = grad_reduced * 0
        return grad_reduced, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """Returns root's ``tensor`` on every rank. Differentiable."""
    if needs_grad(tensor):
        return HorovodBroadcast.apply(tensor, root_rank, name, process_set)
    return synchronize(broadcast_async(tensor, root_rank, name, process_set))
