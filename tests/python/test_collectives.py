"""Every collective of horovod.torch, every dtype, against closed forms over the ranks."""
import time

import pytest
import torch

import horovod.torch as hvd
from conftest import DTYPES, INTEGER_DTYPES, as_float64, contribution, over_ranks, truncated

REDUCE_OPS = [hvd.Sum, hvd.Average, hvd.Min, hvd.Max, hvd.Product]
HALF = [torch.float16, torch.bfloat16]


def check(got, want, dtype, what):
    assert got.dtype == dtype, what
    tolerance = {torch.float16: 1e-2, torch.bfloat16: 1e-2, torch.float32: 1e-6, torch.float64: 1e-12}.get(dtype, 0)
    assert torch.allclose(as_float64(got), want, rtol=tolerance, atol=0), \
        "%s: got %s, want %s" % (what, got.tolist()[:8], want.tolist()[:8])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_allreduce_every_op_out_of_place_and_in_place(dtype, rank):
    n = 23
    for op in REDUCE_OPS:
        product = op == hvd.Product
        mine = contribution(rank, n, dtype, product)
        want = truncated(over_ranks(op, n, product=product), dtype)
        what = "allreduce %s op %d" % (dtype, op)
        result = hvd.allreduce(mine, op=op, name=what)
        check(result, want, dtype, what)
        assert torch.equal(mine, contribution(rank, n, dtype, product)), "the input changed"
        inplace = mine.clone()
        assert hvd.allreduce_(inplace, op=op, name=what + " in place") is inplace
        check(inplace, want, dtype, what + " in place")


@pytest.mark.parametrize("dtype", [torch.int16, torch.int32, torch.float32, torch.float64], ids=str)
def test_allreduce_scale_factors_integers_truncate(dtype, rank, size):
    n = 17
    mine = contribution(rank, n, dtype)
    pre = hvd.allreduce(mine, op=hvd.Sum, prescale_factor=0.3, name="prescale.%s" % dtype)
    post = hvd.allreduce(mine, op=hvd.Sum, postscale_factor=0.3, name="postscale.%s" % dtype)
    # Each rank scales before the sum; the sum is scaled after. Integers truncate toward zero.
    parts = torch.stack([truncated(contribution(r, n) * 0.3, dtype) for r in range(size)])
    check(pre, parts.sum(0), dtype, "prescale")
    check(post, truncated(over_ranks(hvd.Sum, n) * 0.3, dtype), dtype, "postscale")
    # Average of integers: the sum divided by the size, truncated toward zero (as Horovod).
    odd = torch.full([3], -7 if rank == 0 else 0, dtype=dtype)
    avg = hvd.allreduce(odd, op=hvd.Average, name="average.trunc.%s" % dtype)
    check(avg, truncated(torch.full([3], -7.0 / size, dtype=torch.float64), dtype), dtype, "average")


def test_average_argument_and_op_agree(rank):
    t = contribution(rank, 5)
    with pytest.warns(DeprecationWarning, match="`average` has been replaced with `op`"):
        assert torch.equal(hvd.allreduce(t, average=True), hvd.allreduce(t, op=hvd.Average))
        assert torch.equal(hvd.allreduce(t, average=False), hvd.allreduce(t, op=hvd.Sum))
    with pytest.raises(ValueError, match="supersedes average"):
        hvd.allreduce(t, average=True, op=hvd.Sum)


def test_async_handles_poll_and_synchronize(rank):
    handles = []
    for k, dtype in enumerate(DTYPES):
        t = contribution(rank, 100 + k, dtype)
        handles.append((dtype, 100 + k, hvd.allreduce_async(t, op=hvd.Sum, name="async.%d" % k)))
    for dtype, n, h in handles:
        result = hvd.synchronize(h)
        assert hvd.synchronize(h) is None  # a handle is waited on once
        check(result, over_ranks(hvd.Sum, n), dtype, "async %s" % dtype)
    h = hvd.allreduce_async_(contribution(rank, 4), name="async.poll")
    deadline = time.time() + 30
    while not hvd.poll(h):
        assert time.time() < deadline
        time.sleep(0.001)
    check(hvd.synchronize(h), over_ranks(hvd.Average, 4), torch.float64, "after poll")


def test_grouped_allreduce_mixed_dtypes_and_in_place(rank):
    sizes = [3, 17, 1, 64]
    dtypes = [torch.float32, torch.int16, torch.float64, torch.bfloat16]
    tensors = [contribution(rank, n, d) for n, d in zip(sizes, dtypes)]
    results = hvd.grouped_allreduce(tensors, op=hvd.Sum, name="grouped")
    assert len(results) == len(tensors)
    for r, n, d in zip(results, sizes, dtypes):
        check(r, over_ranks(hvd.Sum, n), d, "grouped %s" % d)
    inplace = [t.clone() for t in tensors]
    out = hvd.grouped_allreduce_(inplace, op=hvd.Max, name="grouped.inplace")
    for r, t, n, d in zip(out, inplace, sizes, dtypes):
        assert r is t
        check(t, over_ranks(hvd.Max, n), d, "grouped in place %s" % d)
    h = hvd.grouped_allreduce_async([contribution(rank, 6)], name="grouped.async")
    (avg,) = hvd.synchronize(h)
    check(avg, over_ranks(hvd.Average, 6), torch.float64, "grouped async")


def rows_of(r):
    return r % 3 + 1  # rank r's first dimension in the variable-size tests


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_allgather_different_first_dimensions(dtype, rank, size):
    mine = (torch.arange(rows_of(rank) * 4, dtype=torch.float64).view(-1, 2, 2) + 10 * rank).to(dtype)
    gathered = hvd.allgather(mine, name="gather.%s" % dtype)
    want = torch.cat([torch.arange(rows_of(r) * 4, dtype=torch.float64).view(-1, 2, 2) + 10 * r
                      for r in range(size)])
    check(gathered, want, dtype, "allgather")


def test_grouped_allgather_and_async(rank, size):
    tensors = [torch.full([rows_of(rank), 3], float(rank)), torch.full([1], rank, dtype=torch.int16)]
    first, second = hvd.grouped_allgather(tensors, name="grouped.gather")
    assert torch.equal(first, torch.cat([torch.full([rows_of(r), 3], float(r)) for r in range(size)]))
    assert torch.equal(second, torch.arange(size, dtype=torch.int16))
    h = hvd.allgather_async(torch.tensor([rank]), name="gather.async")
    assert hvd.synchronize(h).tolist() == list(range(size))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_broadcast_from_every_root(dtype, rank, size):
    for root in range(size):
        mine = contribution(rank, 9, dtype)
        out = hvd.broadcast(mine, root, name="bcast.%s.%d" % (dtype, root))
        check(out, as_float64(contribution(root, 9, dtype)), dtype, "broadcast from %d" % root)
        assert torch.equal(mine, contribution(rank, 9, dtype)), "the input changed"
        assert hvd.broadcast_(mine, root, name="bcast_.%s.%d" % (dtype, root)) is mine
        check(mine, as_float64(contribution(root, 9, dtype)), dtype, "broadcast_ from %d" % root)


def test_broadcast_async_in_place_and_scalar(rank, size):
    scalar = torch.tensor(float(rank))
    h = hvd.broadcast_async_(scalar, size - 1, name="bcast.scalar")
    assert hvd.synchronize(h) is scalar and scalar.item() == size - 1


def test_alltoall_uneven_splits(rank, size):
    # Rank r sends (r + p) % 3 rows to rank p; row values name sender and receiver.
    splits = [(rank + p) % 3 for p in range(size)]
    rows = torch.cat([torch.full([splits[p], 2], 10.0 * rank + p) for p in range(size)])
    for given in (torch.tensor(splits, dtype=torch.int32), splits):
        out, received = hvd.alltoall(rows, given, name="alltoall.%s" % type(given).__name__)
        want_splits = [(q + rank) % 3 for q in range(size)]
        assert received.dtype == torch.int32 and received.tolist() == want_splits
        want = torch.cat([torch.full([want_splits[q], 2], 10.0 * q + rank) for q in range(size)])
        assert torch.equal(out, want)


@pytest.mark.parametrize("dtype", [torch.int16, torch.float16, torch.float32], ids=str)
def test_alltoall_even_split(dtype, rank, size):
    t = torch.tensor([100 * rank + p for p in range(size) for _ in range(2)], dtype=dtype)
    out = hvd.alltoall(t, name="alltoall.even.%s" % dtype)
    assert out.tolist() == [100 * q + rank for q in range(size) for _ in range(2)]
    h = hvd.alltoall_async(t, name="alltoall.async.%s" % dtype)
    out, received = hvd.synchronize(h)
    assert received.tolist() == [2] * size


def block(rows, rank, size):
    """This rank's rows of a reducescatter: the first rows % size ranks get one more."""
    base, extra = divmod(rows, size)
    start = rank * base + min(rank, extra)
    return start, base + (1 if rank < extra else 0)


@pytest.mark.parametrize("dtype", [torch.int16, torch.int32, torch.float16, torch.float32, torch.float64], ids=str)
def test_reducescatter_uneven_rows(dtype, rank, size):
    for rows in (2 * size, 2 * size + 1):
        mine = contribution(rank, rows * 3, dtype).view(rows, 3)
        for op in (hvd.Sum, hvd.Average):
            out = hvd.reducescatter(mine, op=op, name="rs.%s.%d.%d" % (dtype, rows, op))
            start, count = block(rows, rank, size)
            want = truncated(over_ranks(op, rows * 3).view(rows, 3)[start:start + count], dtype)
            check(out, want, dtype, "reducescatter rows %d op %d" % (rows, op))


def test_grouped_reducescatter_with_scale(rank, size):
    tensors = [contribution(rank, size * 4).view(size * 2, 2), contribution(rank, size * 2, torch.float32)]
    outs = hvd.grouped_reducescatter(tensors, op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.25,
                                     name="grouped.rs")
    for out, t in zip(outs, tensors):
        rows = t.shape[0]
        start, count = block(rows, rank, size)
        want = (over_ranks(hvd.Sum, t.numel()).view(t.shape) * 0.5)[start:start + count]
        check(out, want, t.dtype, "grouped reducescatter")


def test_join_uneven_steps(rank, size):
    steps = rank + 1
    for step in range(steps):
        t = torch.full([3], float(rank + 1))
        out = hvd.allreduce(t, op=hvd.Sum, name="join.step")
        active = sum(r + 1 for r in range(size) if r + 1 > step)
        assert out.tolist() == [active] * 3
        avg = hvd.allreduce(torch.full([2], float(rank + 1)), op=hvd.Average, name="join.avg")
        assert avg.tolist() == [active / size] * 2  # joined ranks count, with zeros
    last = hvd.join()
    assert last == size - 1
    assert hvd.allgather_object(last) == [last] * size


def test_barrier_waits_for_every_rank(rank):
    start = time.time()
    if rank == 0:
        time.sleep(0.3)
    hvd.barrier()
    assert time.time() - start >= 0.29


def test_fp16_compression(rank):
    t = contribution(rank, 10, torch.float32) / 8
    out = hvd.allreduce(t, op=hvd.Sum, compression=hvd.Compression.fp16, name="fp16")
    assert out.dtype == torch.float32
    assert torch.allclose(out.double(), over_ranks(hvd.Sum, 10) / 8, rtol=1e-3)
    compressed, ctx = hvd.Compression.fp16.compress(torch.ones(3, dtype=torch.int16))
    assert compressed.dtype == torch.int16  # not floating point: unchanged
    assert hvd.Compression.fp16.decompress(compressed, ctx).dtype == torch.int16


def test_objects(rank, size):
    obj = {"rank": rank, "payload": list(range(rank))} if rank == 0 else None
    assert hvd.broadcast_object(obj, root_rank=0) == {"rank": 0, "payload": []}
    got = hvd.broadcast_object({"from": rank, "big": "x" * (1000 * rank)}, root_rank=size - 1, name="obj.last")
    assert got == {"from": size - 1, "big": "x" * (1000 * (size - 1))}
    assert hvd.allgather_object(("r", rank, [rank] * rank)) == [("r", r, [r] * r) for r in range(size)]


def test_sparse_allreduce(rank, size):
    dense = torch.zeros(6, 3)
    dense[rank % 6] = rank + 1.0
    dense[5] = 1.0
    handle = hvd.sparse_allreduce_async(dense.to_sparse(), name="sparse", op=hvd.Sum)
    want = torch.zeros(6, 3)
    for r in range(size):
        want[r % 6] += r + 1.0
    want[5] += size
    assert torch.equal(handle().to_dense(), want)
    avg = hvd.sparse_allreduce_async(dense.to_sparse(), name="sparse.avg", op=hvd.Average)
    assert torch.allclose(avg().to_dense(), want / size)
