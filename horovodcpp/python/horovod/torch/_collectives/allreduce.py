"""allreduce: one tensor, a group of tensors (one negotiation, fused), and sparse tensors (as
allgathers of their indices and values); each in place or not, async or waited for, and
differentiable (the gradient is reduced the same way, Horovod's convention)."""
import torch

from horovod import _horovodcpp as _C
from horovod.common.process_sets import global_process_set
from horovod.torch._collectives.arguments import Average, needs_grad, op_of, set_id
from horovod.torch._collectives.handles import keep, synchronize
from horovod.torch.compression import Compression


def _allreduce_async(tensor, output, name, op, prescale_factor, postscale_factor, process_set):
    handle = _C.allreduce_async(tensor, output, name or "", op, prescale_factor,
                                postscale_factor, set_id(process_set))
    keep(handle, tensor, output)
    return handle


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                    process_set=global_process_set):
    """Starts reducing ``tensor`` (not modified) over the ranks of ``process_set``; op is
    Average (default), Sum, Min, Max or Product, with factors applied before and after.
    Returns a handle for poll() and synchronize(), which returns the result."""
    op = op_of(op, average)
    output = torch.empty_like(tensor, memory_format=torch.contiguous_format)
    return _allreduce_async(tensor, output, name, op, prescale_factor, postscale_factor, process_set)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                     process_set=global_process_set):
    """allreduce_async in place: ``tensor`` holds the result once synchronize() returns."""
    op = op_of(op, average)
    return _allreduce_async(tensor, tensor, name, op, prescale_factor, postscale_factor, process_set)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
               process_set=global_process_set):
    """Reduces ``tensor`` in place over the ranks and returns it."""
    _C.allreduce(tensor, tensor, name or "", op_of(op, average), prescale_factor, postscale_factor,
                 set_id(process_set))
    return tensor


class HorovodAllreduce(torch.autograd.Function):
    """allreduce with a gradient: the gradient is reduced the same way (Horovod's convention)."""

    @staticmethod
    def forward(ctx, tensor, average, name, op, prescale_factor, postscale_factor, process_set):
        ctx.average = average
        ctx.op = op
        ctx.prescale_factor = prescale_factor
        ctx.postscale_factor = postscale_factor
        ctx.process_set = process_set
        return _C.allreduce(tensor, None, name or "", op_of(op, average), prescale_factor,
                            postscale_factor, set_id(process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output.contiguous(), average=ctx.average, op=ctx.op, prescale_factor=ctx.prescale_factor,
                         postscale_factor=ctx.postscale_factor, process_set=ctx.process_set)
        return grad, None, None, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None, prescale_factor=1.0,
              postscale_factor=1.0, process_set=global_process_set):
    """Returns ``tensor`` reduced over the ranks (Average unless ``op`` says otherwise), compressed
    on the way by ``compression``. Differentiable."""
    compressed, ctx = compression.compress(tensor)
    if needs_grad(compressed):
        reduced = HorovodAllreduce.apply(compressed, average, name, op, prescale_factor, postscale_factor,
                                         process_set)
    else:
        reduced = _C.allreduce(compressed, None, name or "", op_of(op, average), prescale_factor,
                               postscale_factor, set_id(process_set))
    return compression.decompress(reduced, ctx)


def _grouped_allreduce_async(tensors, outputs, name, op, prescale_factor, postscale_factor, process_set):
    tensors = list(tensors)
    handle = _C.grouped_allreduce_async(tensors, outputs, name or "", op, prescale_factor,
                                        postscale_factor, set_id(process_set))
    keep(handle, tensors, tuple(outputs))
    return handle


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    """Starts reducing a list of tensors as one group (one negotiation, fused); synchronize()
    returns the results in order."""
    op = op_of(op, average)
    outputs = [torch.empty_like(t, memory_format=torch.contiguous_format) for t in tensors]
    return _grouped_allreduce_async(tensors, outputs, name, op, prescale_factor, postscale_factor, process_set)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    """grouped_allreduce_async in place."""
    op = op_of(op, average)
    return _grouped_allreduce_async(tensors, list(tensors), name, op, prescale_factor, postscale_factor,
                                    process_set)


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                       process_set=global_process_set):
    """Reduces a list of tensors in place as one group and returns them."""
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor, postscale_factor,
                                                process_set))


class HorovodGroupedAllreduce(torch.autograd.Function):
    """grouped_allreduce with gradients reduced the same way."""

    @staticmethod
    def forward(ctx, average, name, op, prescale_factor, postscale_factor, process_set, *tensors):
        ctx.average = average
        ctx.op = op
        ctx.prescale_factor = prescale_factor
        ctx.postscale_factor = postscale_factor
        ctx.process_set = process_set
        return synchronize(grouped_allreduce_async(list(tensors), average, name, op, prescale_factor,
                                                   postscale_factor, process_set))

    @staticmethod
    def backward(ctx, *grad_output):
        grads = grouped_allreduce([g.contiguous() for g in grad_output], average=ctx.average, op=ctx.op,
                                  prescale_factor=ctx.prescale_factor, postscale_factor=ctx.postscale_factor,
                                  process_set=ctx.process_set)
        return (None, None, None, None, None, None, *grads)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Returns a list of tensors reduced over the ranks as one group. Differentiable."""
    compressed, ctxs = zip(*[compression.compress(t) for t in tensors])
    if needs_grad(*compressed):
        reduced = HorovodGroupedAllreduce.apply(average, name, op, prescale_factor, postscale_factor,
                                                process_set, *compressed)
    else:
        reduced = synchronize(grouped_allreduce_async(list(compressed), average, name, op, prescale_factor,
                                                      postscale_factor, process_set))
    return [compression.decompress(t, ctx) for t, ctx in zip(reduced, ctxs)]


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """Reduces a sparse tensor by gathering every rank's indices and values (duplicate indices
    add up when the result is used). Returns a callable that waits and returns the sparse result."""
    # Here, not at the top: allgather's gradient is an allreduce, so allgather imports this module.
    from horovod.torch._collectives.allgather import allgather_async
    t = tensor.coalesce() if not tensor.is_coalesced() else tensor
    # Allgather concatenates along the first dimension: send the indices as rows.
    indices_handle = allgather_async(t._indices().transpose(0, 1).contiguous(), name='%s.indices' % name,
                                     process_set=process_set)
    values_handle = allgather_async(t._values().contiguous(), name='%s.values' % name, process_set=process_set)

    def handle():
        values = synchronize(values_handle)
        indices = synchronize(indices_handle)
        if op == Average:
            values = values / process_set.size()
        return torch.sparse_coo_tensor(indices.transpose(0, 1), values, t.size())

    return handle
