"""hvd.Adasum: the allreduce against closed forms (orthogonal vectors add up, parallel ones
average, two vectors combine as (1 - a.b/2|a|^2) a + (1 - a.b/2|b|^2) b up a tree of the ranks),
and DistributedOptimizer(op=hvd.Adasum), which combines the ranks' parameter updates: orthogonal
updates add up, identical ones are one process's update."""
import copy

import pytest
import torch

import horovod.torch as hvd


def combine(a, b):
    ab, aa, bb = float(a @ b), float(a @ a), float(b @ b)
    return (1 - ab / (2 * aa)) * a + (1 - ab / (2 * bb)) * b


def adasum_of(vectors):
    if len(vectors) == 1:
        return vectors[0]
    half = len(vectors) // 2
    return combine(adasum_of(vectors[:half]), adasum_of(vectors[half:]))


def contribution(rank, n, seed=0):
    g = torch.Generator().manual_seed(1000 * seed + rank)
    return torch.randn(n, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("dtype,tolerance", [(torch.float64, 1e-12), (torch.float32, 1e-5), (torch.float16, 4e-3),
                                             (torch.bfloat16, 3e-2)])
def test_adasum_allreduce_closed_forms(dtype, tolerance, rank, size):
    name = str(dtype)
    ortho = torch.zeros(size + 2, dtype=dtype)
    ortho[rank] = rank + 1
    result = hvd.allreduce(ortho, op=hvd.Adasum, name="adasum.ortho." + name)
    expected = torch.zeros(size + 2, dtype=torch.float64)
    expected[:size] = torch.arange(1, size + 1, dtype=torch.float64)
    assert torch.allclose(result.double(), expected, atol=tolerance * size), result
    v = contribution(0, 33)
    parallel = hvd.allreduce(((rank + 1) * v).to(dtype), op=hvd.Adasum, name="adasum.parallel." + name)
    assert torch.allclose(parallel.double(), ((size + 1) / 2 * v).to(dtype).double(), atol=tolerance * 4 * (size + 1))
    inputs = [contribution(r, 101, seed=1).to(dtype).double() for r in range(size)]
    general = hvd.allreduce(contribution(rank, 101, seed=1).to(dtype), op=hvd.Adasum, name="adasum.general." + name)
    assert torch.allclose(general.double(), adasum_of(inputs), atol=tolerance * 8, rtol=tolerance * 8)
    # The same bits on every rank.
    assert torch.equal(hvd.broadcast(general, 0, name="adasum.same." + name), general)


def test_adasum_grouped_allreduce_reduces_each_tensor_on_its_own(rank, size):
    lengths = [1, 7, size, 250]
    tensors = [contribution(rank, n, seed=k) for k, n in enumerate(lengths)]
    results = hvd.grouped_allreduce(tensors, op=hvd.Adasum, name="adasum.grouped")
    for k, (n, got) in enumerate(zip(lengths, results)):
        assert torch.allclose(got, adasum_of([contribution(r, n, seed=k) for r in range(size)]), atol=1e-12), k


def test_adasum_optimizer_adds_orthogonal_updates(rank, size):
    # Rank r's inputs touch only its own block of four features: the ranks' SGD updates of the
    # weight are orthogonal, and Adasum adds them up.
    model = torch.nn.Linear(4 * size, 1, bias=False).double()
    torch.nn.init.zeros_(model.weight)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(), op=hvd.Adasum)
    x = torch.zeros(3, 4 * size, dtype=torch.float64)
    x[:, 4 * rank:4 * rank + 4] = rank + 1
    for step in range(2):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
        # d(sum)/dW is 3 (r + 1) on rank r's block: each step moves every block by -0.1 of it.
        expected = torch.cat([torch.full((4,), -0.1 * 3 * (r + 1) * (step + 1), dtype=torch.float64)
                              for r in range(size)])
        assert torch.allclose(model.weight.detach().flatten(), expected, atol=1e-12), step


@pytest.mark.parametrize("passes", [1, 2])
def test_adasum_optimizer_with_identical_updates_is_one_process(passes, rank, size):
    # Every rank trains on the same batches with momentum: identical (parallel) updates, which
    # Adasum averages into that same update, so the run is one process's.
    torch.manual_seed(5)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 1)).double()
    reference = copy.deepcopy(model)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
                                   named_parameters=model.named_parameters(), op=hvd.Adasum,
                                   backward_passes_per_step=passes)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(9)
    for step in range(3):
        opt.zero_grad()
        ref_opt.zero_grad()
        for _ in range(passes):
            x = torch.randn(8, 6, generator=g, dtype=torch.float64)
            y = x.sum(1, keepdim=True)
            torch.nn.functional.mse_loss(model(x), y).backward()
            torch.nn.functional.mse_loss(reference(x), y).backward()
        opt.step()
        ref_opt.step()
    for p, q in zip(model.parameters(), reference.parameters()):
        assert torch.allclose(p, q, rtol=1e-10, atol=1e-12)
    with pytest.raises(AssertionError, match="Skipping synchronization is not supported"):
        with opt.skip_synchronize():
            pass


@pytest.mark.needs_ranks(4)
def test_adasum_optimizer_in_a_process_set(rank, size):
    # Ranks 0 and 1 combine their orthogonal updates; the others step on their own.
    pair = hvd.add_process_set([0, 1])
    try:
        model = torch.nn.Linear(8, 1, bias=False).double()
        torch.nn.init.zeros_(model.weight)
        opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                       named_parameters=model.named_parameters(), op=hvd.Adasum, process_set=pair)
        x = torch.zeros(2, 8, dtype=torch.float64)
        x[:, 4 * (rank % 2):4 * (rank % 2) + 4] = 1.0
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
        expected = torch.full((8,), -0.2, dtype=torch.float64)
        if rank >= 2:  # its own step only: only its block moves
            expected = torch.zeros(8, dtype=torch.float64)
            expected[4 * (rank % 2):4 * (rank % 2) + 4] = -0.2
        assert torch.allclose(model.weight.detach().flatten(), expected, atol=1e-12)
    finally:
        hvd.remove_process_set(pair)
