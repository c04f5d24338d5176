"""Gradients of the differentiable collectives follow Horovod's conventions: allreduce's is the
same reduction of the output's gradient; allgather's and broadcast's average that gradient over
the ranks (this rank's rows of it; zero off the root); alltoall's sends it back along the
received splits; reducescatter's gathers it (times the size for Sum)."""
import pytest
import torch

import horovod.torch as hvd


def leaf(shape, value):
    return torch.full(shape, float(value), dtype=torch.float64, requires_grad=True)


@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average])
def test_allreduce_and_grouped_allreduce(op, rank, size):
    x = leaf([3, 2], rank)
    out = hvd.allreduce(x, op=op, name="grad.allreduce.%d" % op)
    # Each rank weighs the output by (rank + 1): the gradient is that weight reduced the same way.
    (out * (rank + 1)).sum().backward()
    weights = sum(r + 1 for r in range(size))
    want = weights if op == hvd.Sum else weights / size
    assert torch.allclose(x.grad, torch.full([3, 2], float(want), dtype=torch.float64))

    ys = [leaf([2], rank), leaf([4], -rank)]
    outs = hvd.grouped_allreduce(ys, op=op, name="grad.grouped.%d" % op)
    sum(o.sum() * (rank + 1) for o in outs).backward()
    for y in ys:
        assert torch.allclose(y.grad, torch.full_like(y, float(want)))


def test_allgather_rows_of_the_averaged_gradient(rank, size):
    rows = rank + 1
    x = leaf([rows, 3], rank)
    out = hvd.allgather(x, name="grad.allgather")
    assert out.shape[0] == size * (size + 1) // 2
    # Output row j gets gradient (j + 1) * (rank + 1) on each rank; the average over the ranks
    # is (j + 1) * mean(rank + 1), and this rank keeps its own rows.
    coeff = torch.arange(1, out.shape[0] + 1, dtype=torch.float64).view(-1, 1)
    (out * coeff * (rank + 1)).sum().backward()
    start = rank * (rank + 1) // 2
    mean_weight = (size + 1) / 2
    want = (torch.arange(start + 1, start + rows + 1, dtype=torch.float64).view(-1, 1) * mean_weight).expand(rows, 3)
    assert torch.allclose(x.grad, want)

    ys = [leaf([rows, 2], 1), leaf([rows], 2)]
    outs = hvd.grouped_allgather(ys, name="grad.grouped.allgather")
    sum(o.sum() for o in outs).backward()
    for y in ys:
        assert torch.allclose(y.grad, torch.ones_like(y))


def test_broadcast_gradient_reaches_the_root_only(rank, size):
    for root in range(size):
        x = leaf([4], rank)
        out = hvd.broadcast(x, root, name="grad.broadcast.%d" % root)
        assert out.tolist() == [float(root)] * 4
        (out * (rank + 1)).sum().backward()
        want = (size + 1) / 2 if rank == root else 0.0
        assert torch.allclose(x.grad, torch.full([4], want, dtype=torch.float64))


def test_alltoall_gradient_goes_back_along_the_splits(rank, size):
    splits = torch.tensor([(rank + p) % 2 + 1 for p in range(size)], dtype=torch.int32)
    x = torch.arange(int(splits.sum()) * 2, dtype=torch.float64).view(-1, 2).requires_grad_()
    out, received = hvd.alltoall(x, splits, name="grad.alltoall")
    # Weight each received row by the sender's rank + 1: the gradient of a row this rank sent
    # to p is then the receiver's weight for it, which is this rank's + 1.
    weights = torch.cat([torch.full([int(n), 2], float(q + 1), dtype=torch.float64)
                         for q, n in enumerate(received.tolist())])
    (out * weights).sum().backward()
    assert torch.allclose(x.grad, torch.full_like(x, float(rank + 1)))


@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average])
def test_reducescatter_gradient_is_the_gathered_gradient(op, rank, size):
    x = leaf([2 * size, 3], 1)
    out = hvd.reducescatter(x, op=op, prescale_factor=0.5, name="grad.rs.%d" % op)
    (out * (rank + 1)).sum().backward()
    # Rank r's block gets weight r + 1; Sum scales by the size, both by the prescale.
    scale = 0.5 * (size if op == hvd.Sum else 1)
    want = torch.cat([torch.full([2, 3], (r + 1) * scale, dtype=torch.float64) for r in range(size)])
    assert torch.allclose(x.grad, want)

    ys = [leaf([size, 2], 1), leaf([2 * size], 1)]
    outs = hvd.grouped_reducescatter(ys, op=op, name="grad.grouped.rs.%d" % op)
    sum(o.sum() for o in outs).backward()
    for y in ys:
        assert torch.allclose(y.grad, torch.full_like(y, float(size if op == hvd.Sum else 1)))


def test_no_graph_without_requires_grad(rank):
    x = torch.ones(3)
    assert hvd.allreduce(x).grad_fn is None
    with torch.no_grad():
        y = torch.ones(3, requires_grad=True)
        assert hvd.allreduce(y, name="grad.nograd").grad_fn is None
