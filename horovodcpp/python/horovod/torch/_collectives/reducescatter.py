"""reducescatter: the reduction of a tensor over the ranks, this rank getting its block of the
first dimension; one tensor or a group, differentiable with Horovod's gradient."""
import torch

from horovod import _horovodcpp as _C
from horovod.common.process_sets import global_process_set
from horovod.torch._collectives.allgather import allgather, grouped_allgather
from horovod.torch._collectives.arguments import Adasum, Average, Sum, needs_grad, set_id
from horovod.torch._collectives.handles import GATHERED, GATHERED_LIST, keep, synchronize
from horovod.torch.compression import Compression


def _reducescatter_op(op):
    if op == Adasum:
        raise NotImplementedError("reducescatter does not support Adasum (an allreduce only, as in Horovod); "
                                  "use op=hvd.Average or hvd.Sum")
    return op


def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set, prescale_factor=1.0,
                        postscale_factor=1.0):
    """Starts reducing ``tensor`` over the ranks and scattering the result's first dimension:
    this rank gets its block (the first ``rows % size`` ranks one row more)."""
    handle = _C.reducescatter_async(tensor, name or "", _reducescatter_op(op), prescale_factor, postscale_factor,
                                    set_id(process_set))
    keep(handle, tensor, GATHERED)
    return handle


class HorovodReducescatter(torch.autograd.Function):
    """reducescatter with Horovod's gradient: the allgather of the output's gradient, scaled as
    the forward was (times the set's size for Sum)."""

    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor, postscale_factor):
        ctx.op = op
        ctx.process_set = process_set
        ctx.scale = prescale_factor * postscale_factor
        return synchronize(reducescatter_async(tensor, name, op, process_set, prescale_factor, postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        scale = ctx.scale * (ctx.process_set.size() if ctx.op == Sum else 1)
        if scale != 1:
            grad_output = grad_output * scale
        return allgather(grad_output.contiguous(), process_set=ctx.process_set), None, None, None, None, None


def reducescatter(tensor, name=None, compression=Compression.none, op=Average, process_set=global_process_set,
                  prescale_factor=1.0, postscale_factor=1.0):
    """Returns this rank's block of the reduction of ``tensor`` over the ranks. Differentiable."""
    compressed, ctx = compression.compress(tensor)
    if needs_grad(compressed):
        reduced = HorovodReducescatter.apply(compressed, name, op, process_set, prescale_factor, postscale_factor)
    else:
        reduced = synchronize(reducescatter_async(compressed, name, op, process_set, prescale_factor,
                                                  postscale_factor))
    return compression.decompress(reduced, ctx)


def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    """reducescatter_async of a list of tensors as one group."""
    tensors = list(tensors)
    handle = _C.grouped_reducescatter_async(tensors, name or "", _reducescatter_op(op), prescale_factor,
                                            postscale_factor, set_id(process_set))
    keep(handle, tensors, GATHERED_LIST)
    return handle


class HorovodGroupedReducescatter(torch.autograd.Function):
    """grouped_reducescatter with reducescatter's gradient for each tensor."""

    @staticmethod
    def forward(ctx, name, op, process_set, prescale_factor, postscale_factor, *tensors):
        ctx.op = op
        ctx.process_set = process_set
        ctx.scale = prescale_factor * postscale_factor
        return tuple(synchronize(grouped_reducescatter_async(list(tensors), name, op, process_set,
                                                             prescale_factor, postscale_factor)))

    @staticmethod
    def backward(ctx, *grad_output):
        scale = ctx.scale * (ctx.process_set.size() if ctx.op == Sum else 1)
        grads = [(g * scale if scale != 1 else g).contiguous() for g in grad_output]
        return (None, None, None, None, None, *grouped_allgather(grads, process_set=ctx.process_set))


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """Returns the reducescatter of each tensor in the list, as one group. Differentiable."""
    compressed, ctxs = zip(*[compression.compress(t) for t in tensors])
    if needs_grad(*compressed):
        reduced = HorovodGroupedReducescatter.apply(name, op, process_set, prescale_factor, postscale_factor,
                                                    *compressed)
    else:
        reduced = synchronize(grouped_reducescatter_async(list(compressed), name, op, process_set,
                                                          prescale_factor, postscale_factor))
    return [compression.decompress(t, ctx) for t, ctx in zip(reduced, ctxs)]
