"""Horovod 0.28's collectives on torch tensors (horovod.torch.mpi_ops), over horovodcpp's core.

Every ``*_async`` call checks its tensors (a bad tensor, a name already in flight or bad splits
raise ValueError before anything is sent) and returns an integer handle; ``synchronize(handle)``
waits with the GIL released and returns the result, or raises HorovodInternalError (a
RuntimeError) naming the tensor, the ranks and what differed when the ranks disagreed; the
runtime goes on either way. The handle map keeps the caller's tensors alive until then.
The functions without ``_async`` are autograd-aware with Horovod's gradients.
"""
import warnings

import torch

from horovod import _horovodcpp as _C
from horovod.common import process_sets as _process_sets
from horovod.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt  # noqa: F401
from horovod.common.process_sets import (ProcessSet, add_process_set, global_process_set,  # noqa: F401
                                         remove_process_set)
from horovod.torch.compression import Compression

_process_sets._setup(_C)

# Reduce ops, with Horovod's values. Adasum: allreduce of floating-point tensors on a power-of-two
# number of ranks (README, "Adasum").
Average, Sum, Adasum, Min, Max, Product = 0, 1, 2, 3, 4, 5

# handle -> (what must stay alive until the operation ends, how synchronize() returns the result)
_handle_map = {}

# How synchronize() builds a result from a handle whose outputs the runtime allocated.
_GATHERED = object()        # one output tensor
_GATHERED_LIST = object()   # a list of output tensors


def init(comm=None, process_sets=None):
    """Starts horovodcpp on every rank (a collective; MPI must launch the process: hvdrun or
    mpirun). ``process_sets``: ProcessSet objects to register now, or "dynamic" (which sets
    HOROVOD_DYNAMIC_PROCESS_SETS=1 so hvd.add_process_set() works later). A second init() is
    harmless; init() after shutdown() is refused (MPI cannot start twice in one process)."""
    import atexit
    import os
    if comm is not None and not (isinstance(comm, (list, tuple)) and len(comm) == 0):
        raise ValueError("hvd.init(comm=...): horovodcpp runs on all of MPI_COMM_WORLD; for collectives on "
                         "some of the ranks, use process sets (hvd.init(process_sets=[hvd.ProcessSet(ranks)]))")
    if isinstance(process_sets, str) and process_sets.lower() == "dynamic":
        os.environ["HOROVOD_DYNAMIC_PROCESS_SETS"] = "1"
    sets = _process_sets._check_process_sets(process_sets)
    if _C.is_initialized() and sets:
        raise ValueError("hvd.init(process_sets=...): horovodcpp is already initialized; "
                         "use hvd.add_process_set()")
    ids = _C.init([ps.ranks for ps in sets])
    _process_sets._init_process_sets(sets, ids)
    global _exit_registered
    if not _exit_registered:
        # Shut down while Python still runs, so MPI finalizes and mpirun sees every rank end well.
        atexit.register(shutdown)
        _exit_registered = True


_exit_registered = False


def shutdown():
    """Stops horovodcpp on this rank: pending operations fail, MPI is finalized."""
    _handle_map.clear()
    _C.shutdown()


is_initialized = _C.is_initialized
rank = _C.rank
size = _C.size
local_rank = _C.local_rank
local_size = _C.local_size
cross_rank = _C.cross_rank
cross_size = _C.cross_size
mpi_threads_supported = _C.mpi_threads_supported


def start_timeline(file_path, mark_cycles=False):
    """Starts recording a Chrome-trace timeline to ``file_path`` (rank 0 records, as with
    HOROVOD_TIMELINE); works with or without HOROVOD_TIMELINE=DYNAMIC."""
    _C.start_timeline(file_path, bool(mark_cycles))


def stop_timeline():
    """Stops the timeline and completes its file."""
    _C.stop_timeline()


def is_homogeneous():
    """Whether every node runs the same number of ranks (judged from this rank's topology)."""
    return local_size() * cross_size() == size()


def mpi_built():
    return _C.mpi_built()


def mpi_enabled():
    return True  # MPI is horovodcpp's controller and host transport


def gloo_built():
    return False


def gloo_enabled():
    return False


def nccl_built():
    """The NCCL version this build has (e.g. 22703, Horovod's form), or 0."""
    return _C.nccl_version()


def cuda_built():
    return _C.cuda_built()


def ddl_built():
    return False


def ccl_built():
    return False


def rocm_built():
    return False


def _op_of(op, average):
    """Horovod's rule for the deprecated ``average`` argument."""
    if average is None:
        return Average if op is None else op
    if op is not None:
        if average is not None:
            raise ValueError('The op parameter supersedes average. Please provide only one of them.')
        return op
    if average is not None:
        warnings.warn('Parameter `average` has been replaced with `op` and will be removed in v1.0',
                      DeprecationWarning)
        return Average if average else Sum
    return Average


def _reducescatter_op(op):
    if op == Adasum:
        raise NotImplementedError("reducescatter does not support Adasum (an allreduce only, as in Horovod); "
                                  "use op=hvd.Average or hvd.Sum")
    return op


def _set_id(process_set):
    ps_id = process_set.process_set_id
    if ps_id is None:
        raise ValueError("%s is not registered: pass it to hvd.init(process_sets=...) or "
                         "hvd.add_process_set() first" % process_set)
    return ps_id


def _needs_grad(*tensors):
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


# --- allreduce -------------------------------------------------------------------------------

def _allreduce_async(tensor, output, name, op, prescale_factor, postscale_factor, process_set):
    handle = _C.allreduce_async(tensor, output, name or "", op, prescale_factor,
                                postscale_factor, _set_id(process_set))
    _handle_map[handle] = (tensor, output)
    return handle


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                    process_set=global_process_set):
    """Starts reducing ``tensor`` (not modified) over the ranks of ``process_set``; op is
    Average (default), Sum, Min, Max or Product, with factors applied before and after.
    Returns a handle for poll() and synchronize(), which returns the result."""
    op = _op_of(op, average)
    output = torch.empty_like(tensor, memory_format=torch.contiguous_format)
    return _allreduce_async(tensor, output, name, op, prescale_factor, postscale_factor, process_set)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                     process_set=global_process_set):
    """allreduce_async in place: ``tensor`` holds the result once synchronize() returns."""
    op = _op_of(op, average)
    return _allreduce_async(tensor, tensor, name, op, prescale_factor, postscale_factor, process_set)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
               process_set=global_process_set):
    """Reduces ``tensor`` in place over the ranks and returns it."""
    _C.allreduce(tensor, tensor, name or "", _op_of(op, average), prescale_factor, postscale_factor,
                 _set_id(process_set))
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
        return _C.allreduce(tensor, None, name or "", _op_of(op, average), prescale_factor,
                            postscale_factor, _set_id(process_set))

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
    if _needs_grad(compressed):
        reduced = HorovodAllreduce.apply(compressed, average, name, op, prescale_factor, postscale_factor,
                                         process_set)
    else:
        reduced = _C.allreduce(compressed, None, name or "", _op_of(op, average), prescale_factor,
                               postscale_factor, _set_id(process_set))
    return compression.decompress(reduced, ctx)


def _grouped_allreduce_async(tensors, outputs, name, op, prescale_factor, postscale_factor, process_set):
    tensors = list(tensors)
    handle = _C.grouped_allreduce_async(tensors, outputs, name or "", op, prescale_factor,
                                        postscale_factor, _set_id(process_set))
    _handle_map[handle] = (tensors, tuple(outputs))
    return handle


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    """Starts reducing a list of tensors as one group (one negotiation, fused); synchronize()
    returns the results in order."""
    op = _op_of(op, average)
    outputs = [torch.empty_like(t, memory_format=torch.contiguous_format) for t in tensors]
    return _grouped_allreduce_async(tensors, outputs, name, op, prescale_factor, postscale_factor, process_set)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    """grouped_allreduce_async in place."""
    op = _op_of(op, average)
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
    if _needs_grad(*compressed):
        reduced = HorovodGroupedAllreduce.apply(average, name, op, prescale_factor, postscale_factor,
                                                process_set, *compressed)
    else:
        reduced = synchronize(grouped_allreduce_async(list(compressed), average, name, op, prescale_factor,
                                                      postscale_factor, process_set))
    return [compression.decompress(t, ctx) for t, ctx in zip(reduced, ctxs)]


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """Reduces a sparse tensor by gathering every rank's indices and values (duplicate indices
    add up when the result is used). Returns a callable that waits and returns the sparse result."""
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


# --- allgather -------------------------------------------------------------------------------

def allgather_async(tensor, name=None, process_set=global_process_set):
    """Starts concatenating every rank's ``tensor`` along the first dimension (which may differ
    between ranks; the others must agree)."""
    handle = _C.allgather_async(tensor, name or "", _set_id(process_set))
    _handle_map[handle] = (tensor, _GATHERED)
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
    if _needs_grad(tensor):
        return HorovodAllgather.apply(tensor, name, process_set)
    return synchronize(allgather_async(tensor, name, process_set))


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    """allgather_async of a list of tensors as one group."""
    tensors = list(tensors)
    handle = _C.grouped_allgather_async(tensors, name or "", _set_id(process_set))
    _handle_map[handle] = (tensors, _GATHERED_LIST)
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
    if _needs_grad(*tensors):
        return list(HorovodGroupedAllgather.apply(name, process_set, *tensors))
    return synchronize(grouped_allgather_async(tensors, name, process_set))


# --- broadcast -------------------------------------------------------------------------------

def _broadcast_async(tensor, output, root_rank, name, process_set):
    handle = _C.broadcast_async(tensor, output, root_rank, name or "", _set_id(process_set))
    _handle_map[handle] = (tensor, output)
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
        if rank() != ctx.root_rank:
            grad_reduced = grad_reduced * 0
        return grad_reduced, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """Returns root's ``tensor`` on every rank. Differentiable."""
    if _needs_grad(tensor):
        return HorovodBroadcast.apply(tensor, root_rank, name, process_set)
    return synchronize(broadcast_async(tensor, root_rank, name, process_set))


# --- alltoall --------------------------------------------------------------------------------

def _splits_list(splits):
    if splits is None:
        return []
    if isinstance(splits, torch.Tensor):
        if splits.dtype != torch.int32:
            raise ValueError("alltoall: splits must hold 32-bit integers (torch.int32), got %s" % splits.dtype)
        return splits.cpu().tolist()
    return [int(s) for s in splits]


class _Alltoall:
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
    set_id = _set_id(process_set)
    try:
        split_list = _splits_list(splits)
    except ValueError as e:
        # The peers' handles fail with this reason instead of waiting (the core's own checks
        # withdraw by themselves; an unnamed call has no name yet).
        if name:
            _C.withdraw("alltoall." + name, "alltoall of 'alltoall.%s': %s" % (name, e), set_id)
        raise
    handle = _C.alltoall_async(tensor, split_list, name or "", set_id)
    _handle_map[handle] = (tensor, _Alltoall(splits))
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
    if _needs_grad(tensor):
        return HorovodAlltoall.apply(tensor, splits, name, process_set)
    output, received_splits = synchronize(alltoall_async(tensor, splits, name, process_set))
    return output if splits is None else (output, received_splits)


# --- reducescatter ---------------------------------------------------------------------------

def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set, prescale_factor=1.0,
                        postscale_factor=1.0):
    """Starts reducing ``tensor`` over the ranks and scattering the result's first dimension:
    this rank gets its block (the first ``rows % size`` ranks one row more)."""
    handle = _C.reducescatter_async(tensor, name or "", _reducescatter_op(op), prescale_factor, postscale_factor,
                                    _set_id(process_set))
    _handle_map[handle] = (tensor, _GATHERED)
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
    if _needs_grad(compressed):
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
                                            postscale_factor, _set_id(process_set))
    _handle_map[handle] = (tensors, _GATHERED_LIST)
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
    if _needs_grad(*compressed):
        reduced = HorovodGroupedReducescatter.apply(name, op, process_set, prescale_factor, postscale_factor,
                                                    *compressed)
    else:
        reduced = synchronize(grouped_reducescatter_async(list(compressed), name, op, process_set,
                                                          prescale_factor, postscale_factor))
    return [compression.decompress(t, ctx) for t, ctx in zip(reduced, ctxs)]


# --- handles, join, barrier ------------------------------------------------------------------

def poll(handle):
    """True once the operation behind ``handle`` has finished (synchronize() will not block)."""
    return _C.poll(handle)


def synchronize(handle):
    """Waits for the operation behind ``handle`` (the GIL released) and returns its result:
    the output tensor, a tuple/list for grouped calls, (output, received_splits) for alltoall.
    Raises HorovodInternalError when the operation failed. None for an unknown handle."""
    entry = _handle_map.pop(handle, None)
    if entry is None:
        return None
    result = entry[1]
    if result is _GATHERED:
        return _C.wait_outputs(handle)[0][0]
    if result is _GATHERED_LIST:
        return _C.wait_outputs(handle)[0]
    if isinstance(result, _Alltoall):
        outputs, received = _C.wait_outputs(handle)
        return result.result(outputs, received)
    _C.wait(handle)
    return result


def join(device=-1):
    """Called by a rank out of data: it keeps serving the other ranks' allreduces with zeros
    until every rank has joined (allgather, broadcast and the others fail while a rank has
    joined). Returns the rank that joined last, the same on every rank. ``device`` is accepted
    for compatibility (the runtime places the zeros itself)."""
    return _C.join(0)


def barrier(process_set=global_process_set):
    """Returns once every rank of the set has reached it (the GIL released meanwhile)."""
    _C.barrier(_set_id(process_set))
