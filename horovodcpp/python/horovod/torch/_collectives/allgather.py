"""allgather: every rank's tensor concatenated along the first dimension (which may differ between
ranks), one tensor or a group; differentiable with Horovod's gradient."""
import torch

from horovod import _horovodcpp as _C
from horovod.common.process_sets import global_process_set
from horovod.torch._collectives.allreduce import allreduce, grouped_allreduce
from horovod.torch._collectives.arguments import Average, needs_grad, set_id
from horovod.torch._collectives.handles import GATHERED, GATHERED_LIST, keep, synchronize


def allgather_async(tensor, name=None, process_set=global_process_set):
    """Starts concatenating every rank's ``tensor`` along the first dimension (which may differ
    between ranks; the others must agree)."""
    handle = _C.allgather_async(tensor, name or "", set_id(process_set))
    keep(handle, tensor, GATHERED)
    return handle


class HorovodAllgather(torch.autograd.Function):
    """allgather with Horovod's gradient: the average over the ranks of the output's gradient,
    this rank's rows of it."""

    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.dim = tensor.shape[0]
        ctx.process_set = process_set
        return synchronize(allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad_reduced = allreduce(grad_output.contiguous(), op=Average, process_set=ctx.process_set)
        dims = allgather(torch.tensor([ctx.dim], dtype=torch.int64), process_set=ctx.process_set)
        offset = int(dims[:ctx.process_set.rank()].sum())
        return grad_reduced.narrow(0, offset, ctx.dim), None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """Returns every rank's ``tensor`` concatenated along the first dimension. Differentiable."""
    if needs_grad(tensor):
        return HorovodAllgather.apply(tensor, name, process_set)
    return synchronize(allgather_async(tensor, name, process_set))


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    """allgather_async of a list of tensors as one group."""
    tensors = list(tensors)
    handle = _C.grouped_allgather_async(tensors, name or "", set_id(process_set))
    keep(handle, tensors, GATHERED_LIST)
    return handle


class HorovodGroupedAllgather(torch.autograd.Function):
    """grouped_allgather with allgather's gradient for each tensor."""

    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.dims = [t.shape[0] for t in tensors]
        ctx.process_set = process_set
        return tuple(synchronize(grouped_allgather_async(list(tensors), name, process_set)))

    @staticmethod
    def backward(ctx, *grad_output):
        grads = grouped_allreduce([g.contiguous() for g in grad_output], op=Average, process_set=ctx.process_set)
        dims = allgather(torch.tensor([ctx.dims], dtype=torch.int64), process_set=ctx.process_set)
        offsets = dims[:ctx.process_set.rank()].sum(dim=0).tolist()
        return (None, None, *[g.narrow(0, int(o), d) for g, o, d in zip(grads, offsets, ctx.dims)])


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """Returns the allgather of each tensor in the list, gathered as one group. Differentiable."""
    if needs_grad(*tensors):
        return list(HorovodGroupedAllgather.apply(name, process_set, *tensors))
    return synchronize(grouped_allgather_async(tensors, name, process_set))
