"""Process sets (needs HOROVOD_DYNAMIC_PROCESS_SETS=1): collectives within a set, several sets at
once, roots given as global ranks, the optimizer in a set, and adding/removing sets."""
import pytest
import torch

import horovod.torch as hvd

pytestmark = pytest.mark.needs_ranks(2)


@pytest.fixture
def halves(rank, size):
    """The even and the odd ranks as two sets; yields (this rank's set, its ranks)."""
    even = hvd.add_process_set([r for r in range(size) if r % 2 == 0])
    odd = hvd.add_process_set(hvd.ProcessSet([r for r in range(size) if r % 2 == 1]))
    mine = even if rank % 2 == 0 else odd
    yield mine, mine.ranks
    assert hvd.remove_process_set(odd)
    assert hvd.remove_process_set(even)
    assert even.process_set_id is None and odd.process_set_id is None


def test_collectives_within_each_half(halves, rank):
    ps, members = halves
    assert ps.size() == len(members) and ps.rank() == members.index(rank) and ps.included()
    total = hvd.allreduce(torch.tensor([rank + 1.0]), op=hvd.Sum, name="ps.sum", process_set=ps)
    assert total.item() == sum(r + 1 for r in members)
    gathered = hvd.allgather(torch.full([rank % 3 + 1], rank), name="ps.gather", process_set=ps)
    assert gathered.tolist() == [r for r in members for _ in range(r % 3 + 1)]
    for root in members:  # roots are global ranks, as in Horovod
        out = hvd.broadcast(torch.tensor([rank]), root, name="ps.bcast.%d" % root, process_set=ps)
        assert out.item() == root
    splits = [1] * len(members)
    out, received = hvd.alltoall(torch.tensor([rank * 10 + p for p in members]), splits, name="ps.a2a",
                                 process_set=ps)
    assert out.tolist() == [q * 10 + rank for q in members] and received.tolist() == splits
    scattered = hvd.reducescatter(torch.ones(len(members) * 2, 2), op=hvd.Sum, name="ps.rs", process_set=ps)
    assert scattered.tolist() == [[len(members)] * 2] * 2
    assert hvd.broadcast_object("from %d" % members[-1], root_rank=members[-1], name="ps.obj",
                                process_set=ps) == "from %d" % members[-1]
    hvd.barrier(process_set=ps)
    # Both halves use the same names at the same time: sets never mix.
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum, name="ps.same", process_set=ps).item() == len(members)


def test_optimizer_in_a_set_averages_over_the_set_only(halves, rank):
    ps, members = halves
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1, bias=False)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                   named_parameters=model.named_parameters(), process_set=ps)
    start = model.weight.detach().clone()
    (model(torch.ones(1, 2)) * (rank + 1)).sum().backward()
    opt.step()
    mean = sum(r + 1 for r in members) / len(members)
    assert torch.allclose(model.weight, start - mean)


def test_errors_with_sets(halves, rank, size):
    ps, members = halves
    with pytest.raises(ValueError):
        hvd.add_process_set(list(members))  # the same ranks as a registered set
    with pytest.raises(ValueError, match="not in"):
        outsider = next(r for r in range(size) if r not in members)
        hvd.broadcast(torch.ones(1), outsider, name="ps.bad.root", process_set=ps)
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum, name="ps.after.error", process_set=ps).item() == len(members)


def test_sets_made_at_init_and_removed_sets(rank, size):
    everyone_but_last = hvd.add_process_set(list(range(size - 1)))
    if rank < size - 1:
        out = hvd.allreduce(torch.ones(1), op=hvd.Sum, name="ps.most", process_set=everyone_but_last)
        assert out.item() == size - 1
    else:
        assert not everyone_but_last.included()
        with pytest.raises(ValueError):
            hvd.allreduce(torch.ones(1), name="ps.outsider", process_set=everyone_but_last)
    hvd.remove_process_set(everyone_but_last)
    with pytest.raises(ValueError, match="not registered"):
        hvd.allreduce(torch.ones(1), process_set=everyone_but_last)
    with pytest.raises(ValueError, match="already initialized"):
        hvd.init(process_sets=[hvd.ProcessSet([0])])
