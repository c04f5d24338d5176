"""Topology, what the build contains, the GIL released while waiting, and the timeline."""
import json
import os
import threading
import time

import torch

import horovod
import horovod.torch as hvd


def test_topology_matches_mpi(rank, size):
    assert hvd.is_initialized()
    assert rank == int(os.environ['OMPI_COMM_WORLD_RANK'])
    assert size == int(os.environ['OMPI_COMM_WORLD_SIZE'])
    assert hvd.local_rank() == int(os.environ['OMPI_COMM_WORLD_LOCAL_RANK'])
    assert hvd.local_size() == int(os.environ['OMPI_COMM_WORLD_LOCAL_SIZE'])
    assert hvd.cross_size() * hvd.local_size() == size and hvd.is_homogeneous()
    assert hvd.cross_rank() == 0  # one host
    assert hvd.global_process_set.ranks == list(range(size))
    assert hvd.global_process_set.rank() == rank and hvd.global_process_set.size() == size


def test_build_queries():
    assert hvd.mpi_built() and hvd.mpi_enabled() and hvd.mpi_threads_supported()
    assert not hvd.gloo_built() and not hvd.gloo_enabled()
    assert not hvd.ccl_built() and not hvd.ddl_built() and not hvd.rocm_built()
    nccl = hvd.nccl_built()
    assert isinstance(nccl, int) and (nccl == 0 or nccl >= 2000)  # Horovod's form: a version number
    assert hvd.cuda_built() == (nccl != 0)
    assert horovod.__version__.startswith("0.28")


def test_the_gil_is_released_while_waiting(rank):
    """Another Python thread of a rank that waits (in synchronize, barrier, join) keeps running."""
    ticks = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0.0005)

    worker = threading.Thread(target=spin, daemon=True)
    worker.start()
    try:
        for wait in ("synchronize", "barrier", "join"):
            # Rank 0 arrives 0.3 s late, so every other rank waits that long.
            if rank == 0:
                time.sleep(0.3)
            before = ticks[0]
            if wait == "synchronize":
                hvd.synchronize(hvd.allreduce_async(torch.ones(2), name="gil.wait"))
            elif wait == "barrier":
                hvd.barrier()
            else:
                hvd.join()
            if rank != 0:
                assert ticks[0] - before > 50, "the other thread stalled during %s" % wait
            hvd.barrier()
    finally:
        stop.set()
        worker.join()


def test_timeline_at_run_time(tmp_path_factory, rank):
    # HOROVOD_TIMELINE=DYNAMIC (set by the test's launch): no file until start_timeline().
    assert os.environ.get('HOROVOD_TIMELINE') == 'DYNAMIC'
    assert not os.path.exists('DYNAMIC')
    path = hvd.broadcast_object(str(tmp_path_factory.mktemp("timeline") / "trace.json"), 0)
    hvd.start_timeline(path, mark_cycles=True)
    hvd.allreduce(torch.ones(3), name="timeline_test")
    hvd.stop_timeline()
    hvd.barrier()
    if rank == 0:
        with open(path) as f:
            text = f.read()
        events = json.loads(text)
        names = {e.get('name') for e in (events if isinstance(events, list) else events['traceEvents'])}
        assert 'NEGOTIATE_ALLREDUCE' in names and 'ALLREDUCE' in names
        assert 'allreduce.timeline_test' in text
