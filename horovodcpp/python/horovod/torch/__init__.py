"""horovod.torch on horovodcpp: Horovod 0.28's PyTorch API, so that
``import horovod.torch as hvd`` scripts run unchanged on horovodcpp's runtime.

Launch with ``hvdrun -np 2 python3 train.py`` or a plain ``mpirun``. Differences from Horovod:
MPI only (no Gloo controller), and elastic jobs are relaunched by hvdrun and resume
from their newest commit instead of being repaired in place (docs/python.md).
"""
import torch  # noqa: F401  (loads PyTorch's libraries before the extension that links them)

from horovod.torch import elastic
from horovod.torch.compression import Compression
from horovod.torch.functions import (allgather_object, broadcast_object, broadcast_optimizer_state,
                                     broadcast_parameters)
from horovod.torch.mpi_ops import (Adasum, Average, HorovodInternalError, Max, Min, ProcessSet, Product, Sum,
                                   add_process_set, allgather, allgather_async, allreduce, allreduce_,
                                   allreduce_async, allreduce_async_, alltoall, alltoall_async, barrier, broadcast,
                                   broadcast_, broadcast_async, broadcast_async_, ccl_built, cross_rank, cross_size,
                                   cuda_built, ddl_built, global_process_set, gloo_built, gloo_enabled,
                                   grouped_allgather, grouped_allgather_async, grouped_allreduce,
                                   grouped_allreduce_, grouped_allreduce_async, grouped_allreduce_async_,
                                   grouped_reducescatter, grouped_reducescatter_async, init, is_homogeneous,
                                   is_initialized, join, local_rank, local_size, mpi_built, mpi_enabled,
                                   mpi_threads_supported, nccl_built, poll, rank, reducescatter,
                                   reducescatter_async, remove_process_set, rocm_built, shutdown, size,
                                   sparse_allreduce_async, start_timeline, stop_timeline, synchronize)
from horovod.torch.optimizer import DistributedOptimizer
from horovod.torch.sync_batch_norm import SyncBatchNorm


def _check_has_gpu():
    """Whether PyTorch sees a GPU (what horovod.common.util.gpu_available('torch') asks)."""
    return torch.cuda.is_available()
