"""Horovod 0.28's collectives on torch tensors (horovod.torch.mpi_ops), over horovodcpp's core.

Every ``*_async`` call checks its tensors (a bad tensor, a name already in flight or bad splits
raise ValueError before anything is sent) and returns an integer handle; ``synchronize(handle)``
waits with the GIL released and returns the result, or raises HorovodInternalError (a
RuntimeError) naming the tensor, the ranks and what differed when the ranks disagreed; the
runtime goes on either way. The handle map keeps the caller's tensors alive until then.
The functions without ``_async`` are autograd-aware with Horovod's gradients.

Here: init, shutdown, the basics (rank, size, ...), join and barrier. Each collective lives in its
own module under _collectives/ and is exported here under Horovod's names.
"""
import torch  # noqa: F401  (loads PyTorch's libraries before the extension that links them)

from horovod import _horovodcpp as _C
from horovod.common import process_sets as _process_sets
from horovod.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt  # noqa: F401
from horovod.common.process_sets import (ProcessSet, add_process_set, global_process_set,  # noqa: F401
                                         remove_process_set)

# The collectives, one module each, under the names Horovod's mpi_ops gives them.
from horovod.torch._collectives import handles as _handles
from horovod.torch._collectives.allgather import (HorovodAllgather, HorovodGroupedAllgather,  # noqa: F401
                                                  allgather, allgather_async, grouped_allgather,
                                                  grouped_allgather_async)
from horovod.torch._collectives.allreduce import (HorovodAllreduce, HorovodGroupedAllreduce,  # noqa: F401
                                                  allreduce, allreduce_, allreduce_async, allreduce_async_,
                                                  grouped_allreduce, grouped_allreduce_, grouped_allreduce_async,
                                                  grouped_allreduce_async_, sparse_allreduce_async)
from horovod.torch._collectives.alltoall import HorovodAlltoall, alltoall, alltoall_async  # noqa: F401
from horovod.torch._collectives.arguments import Adasum, Average, Max, Min, Product, Sum, set_id  # noqa: F401
from horovod.torch._collectives.broadcast import (HorovodBroadcast, broadcast, broadcast_,  # noqa: F401
                                                  broadcast_async, broadcast_async_)
from horovod.torch._collectives.handles import poll, synchronize  # noqa: F401
from horovod.torch._collectives.reducescatter import (HorovodGroupedReducescatter,  # noqa: F401
                                                      HorovodReducescatter, grouped_reducescatter,
                                                      grouped_reducescatter_async, reducescatter,
                                                      reducescatter_async)

_process_sets._setup(_C)


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
    _handles.forget_all()
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


def join(device=-1):
    """Called by a rank out of data: it keeps serving the other ranks' allreduces with zeros
    until every rank has joined (allgather, broadcast and the others fail while a rank has
    joined). Returns the rank that joined last, the same on every rank. ``device`` is accepted
    for compatibility (the runtime places the zeros itself)."""
    return _C.join(0)


def barrier(process_set=global_process_set):
    """Returns once every rank of the set has reached it (the GIL released meanwhile)."""
    _C.barrier(set_id(process_set))
