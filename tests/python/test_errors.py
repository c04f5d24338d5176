"""Every error a user can reach: the exception type Horovod raises, a message naming what was
wrong, the same outcome on every rank, and a runtime that goes on working afterwards."""
import pytest
import torch

import horovod.torch as hvd
from horovod.common.exceptions import HorovodInternalError


def next_operation_works(name):
    out = hvd.allreduce(torch.ones(3), op=hvd.Sum, name=name)
    assert out.tolist() == [hvd.size()] * 3


@pytest.mark.needs_ranks(2)
def test_mismatched_dtype_fails_on_every_rank(rank):
    t = torch.ones(4, dtype=torch.float32 if rank == 0 else torch.int16)
    with pytest.raises(HorovodInternalError) as info:
        hvd.allreduce(t, name="mismatch.dtype")
    message = str(info.value)
    assert "allreduce.mismatch.dtype" in message
    assert "rank 0 has float32" in message and "rank 1 has int16" in message
    assert isinstance(info.value, RuntimeError)  # Horovod's users catch RuntimeError
    next_operation_works("after.dtype")


@pytest.mark.needs_ranks(2)
def test_mismatched_shapes_and_roots(rank):
    with pytest.raises(HorovodInternalError, match=r"\[2, 3\].*\[2, 4\]"):
        hvd.allreduce(torch.ones(2, 3 if rank == 0 else 4), name="mismatch.shape")
    with pytest.raises(HorovodInternalError, match="broadcast roots"):
        hvd.broadcast(torch.ones(2), root_rank=rank, name="mismatch.root")
    with pytest.raises(HorovodInternalError, match="first dimension"):
        hvd.allgather(torch.ones(2, rank + 1), name="mismatch.gather")
    with pytest.raises(HorovodInternalError, match="reduce ops"):
        hvd.allreduce(torch.ones(2), op=hvd.Sum if rank == 0 else hvd.Max, name="mismatch.op")
    next_operation_works("after.mismatch")


@pytest.mark.needs_ranks(2)
def test_name_in_flight_is_a_value_error_on_the_rank_that_did_it(rank, size):
    for first in range(size):
        t = torch.ones(3)
        if rank == first:
            handle = hvd.allreduce_async(t, name="twice")
            with pytest.raises(ValueError, match="allreduce.twice.*already in flight"):
                hvd.allreduce_async(t, name="twice")
        hvd.barrier()
        if rank != first:
            handle = hvd.allreduce_async(t, name="twice")
        assert hvd.synchronize(handle).tolist() == [1.0] * 3


def test_bad_arguments_are_value_errors_before_anything_is_sent(size):
    t = torch.ones(size + 1)
    if size > 1:  # one rank takes any length
        with pytest.raises(ValueError, match="not divisible"):
            hvd.alltoall(t, name="bad.even")
    with pytest.raises(ValueError, match="splits sum to %d but the first dimension is %d" % (size, size + 1)):
        hvd.alltoall(t, torch.ones(size, dtype=torch.int32), name="bad.sum")
    with pytest.raises(ValueError, match="int32"):
        hvd.alltoall(t, torch.ones(size), name="bad.split.dtype")
    with pytest.raises(ValueError, match="%d splits for %d ranks" % (size + 1, size)):
        hvd.alltoall(t, [1] * (size + 1), name="bad.count")
    with pytest.raises(ValueError, match="dtype ComplexFloat is not supported"):
        hvd.allreduce(torch.ones(2, dtype=torch.complex64), name="bad.dtype")
    with pytest.raises(ValueError, match="not contiguous"):
        hvd.allreduce(torch.ones(4, 4).t(), name="bad.layout")
    with pytest.raises(ValueError, match="root rank %d is out of range" % size):
        hvd.broadcast(torch.ones(2), root_rank=size, name="bad.root")
    with pytest.raises(ValueError, match="scalar"):
        hvd.allgather(torch.tensor(1.0), name="bad.scalar")
    next_operation_works("after.arguments")


@pytest.mark.needs_ranks(2)
def test_a_value_error_on_one_rank_fails_the_collective_on_the_others(rank, size):
    """Bad arguments on the last rank only: ValueError there at once, and the other ranks' handles
    fail naming that rank and its reason instead of waiting for it, whichever layer checked them
    (the core, the extension, the Python layer)."""
    last = size - 1
    t = torch.ones(2 * size)
    cases = [
        # The core's check: splits that do not add up.
        ("alltoall", "one.core", "splits sum to %d" % (2 * size + 1),
         lambda: hvd.alltoall(t, [3] + [2] * (size - 1) if rank == last else [2] * size, name="one.core")),
        # The extension's: a dtype horovodcpp does not reduce.
        ("allreduce", "one.dtype", "dtype ComplexFloat is not supported",
         lambda: hvd.allreduce(torch.ones(2, dtype=torch.complex64 if rank == last else torch.float32),
                               name="one.dtype")),
        # The Python layer's: splits that are not int32.
        ("alltoall", "one.python", "splits must hold 32-bit integers",
         lambda: hvd.alltoall(t, torch.full((size,), 2, dtype=torch.int64 if rank == last else torch.int32),
                              name="one.python")),
    ]
    for op, name, reason, call in cases:
        if rank == last:
            with pytest.raises(ValueError, match=reason):
                call()
        else:
            with pytest.raises(HorovodInternalError) as info:
                call()
            message = str(info.value)
            assert "%s.%s" % (op, name) in message and "rank %d" % last in message, message
            assert reason in message, message
    next_operation_works("after.one.rank")


def test_adasum_refusals_name_what_was_wrong():
    with pytest.raises(RuntimeError, match="reducescatter does not support Adasum"):  # what Horovod's tests catch
        hvd.reducescatter(torch.ones(4), op=hvd.Adasum)
    with pytest.raises(ValueError, match="Adasum reduces float16, bfloat16, float32 and float64 tensors, not int32"):
        hvd.allreduce(torch.ones(2, dtype=torch.int32), op=hvd.Adasum, name="adasum.int")
    next_operation_works("after.adasum")


@pytest.mark.needs_ranks(2)
def test_collectives_other_than_allreduce_fail_while_a_rank_has_joined(rank, size):
    for first in range(size):
        if rank != first:
            # Unnamed on purpose: the ranks' generated names no longer agree once one skipped a
            # call, and the operation must still fail instead of waiting for good.
            with pytest.raises(HorovodInternalError, match="joined"):
                hvd.allgather(torch.ones(2, 2))
        last = hvd.join()
        assert last != first
    next_operation_works("after.join")


def test_unregistered_process_set_and_unknown_handle():
    unregistered = hvd.ProcessSet([0])
    with pytest.raises(ValueError, match="not registered"):
        hvd.allreduce(torch.ones(1), process_set=unregistered)
    assert hvd.synchronize(123456789) is None
    with pytest.raises(ValueError, match="unknown"):
        hvd.poll(123456789)
    assert not hvd.remove_process_set(hvd.global_process_set)


def test_optimizer_argument_errors():
    net1, net2 = torch.nn.Linear(1, 1), torch.nn.Linear(1, 1)
    opt = torch.optim.SGD(list(net1.parameters()) + list(net2.parameters()), lr=0.1)
    with pytest.raises(ValueError, match="Found duplicates: bias, weight"):
        hvd.DistributedOptimizer(opt, named_parameters=list(net1.named_parameters()) + list(net2.named_parameters()))
    with pytest.raises(ValueError, match="were not named"):
        hvd.DistributedOptimizer(opt, named_parameters=list(net1.named_parameters()))
    with pytest.raises(ValueError, match="sequence of tuples"):
        hvd.DistributedOptimizer(opt, named_parameters=list(net1.parameters()))
    with pytest.raises(ValueError, match="gradient_predivide_factor"):
        hvd.DistributedOptimizer(opt, op=hvd.Sum, gradient_predivide_factor=2.0)
