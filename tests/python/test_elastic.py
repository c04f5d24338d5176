"""horovod.torch.elastic on horovodcpp's commit store: TorchState commits, restores and syncs a
model, an optimizer, a sampler and plain values; ElasticSampler lays out the rest of an epoch.
As in Horovod, restore() goes back to this state's own last snapshot, on this rank alone.
(elastic_relaunch.sh runs a job that stops for a change of hosts and resumes at another size.)"""
import os
from fractions import Fraction

import pytest
import torch

import horovod.torch as hvd


@pytest.fixture
def state(rank):
    torch.manual_seed(rank)  # different on every rank until synced
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sampler = hvd.elastic.ElasticSampler(list(range(10)), shuffle=True, seed=4)
    # ratio: a class PyTorch's weights-only loader refuses (its default from 2.6 on)
    return hvd.elastic.TorchState(model, optimizer, epoch=1, batch=rank, sampler=sampler, note="r%d" % rank,
                                  ratio=Fraction(1, 3 + rank))


def weights(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def test_commit_then_restore_goes_back_to_the_commit(state, rank):
    assert os.environ.get('HOROVOD_ELASTIC_DIR'), "the test's launch names the commit store"
    state.sync()  # rank 0's state everywhere
    assert state.batch == 0 and state.note == "r0" and state.ratio == Fraction(1, 3)
    model, optimizer = state.model, state.optimizer
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    state.epoch, state.batch = 2, 7
    state.sampler.record_batch(0, 2)
    first = state.commit_id
    state.commit()
    assert state.commit_id == first + 1
    committed = weights(model).clone()
    momentum = optimizer.state[model.weight]['momentum_buffer'].clone()

    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    optimizer.state[model.weight]['momentum_buffer'].zero_()
    state.epoch, state.batch, state.note, state.ratio = 9, 9, "changed", Fraction(9)
    state.sampler.record_batch(1, 2)

    state.restore()
    assert state.commit_id == first + 1
    assert torch.equal(weights(model), committed)
    assert torch.equal(optimizer.state[model.weight]['momentum_buffer'], momentum)
    assert (state.epoch, state.batch, state.note, state.ratio) == (2, 7, "r0", Fraction(1, 3))
    assert state.sampler.processed_num == 2 * hvd.size()
    gathered = hvd.allgather(weights(model).unsqueeze(0), name="elastic.same")
    assert all(torch.equal(row, gathered[0]) for row in gathered)


def test_sync_makes_every_rank_rank_zeros(state, rank):
    state.sync()
    assert torch.equal(weights(state.model), hvd.broadcast(weights(state.model), 0, name="elastic.sync"))
    assert state.note == "r0"


def test_reset_callbacks_run_only_after_a_restore_at_another_size(state):
    calls = []
    state.register_reset_callbacks([lambda: calls.append(hvd.size())])
    state.commit()
    state.restore()  # taken at this size
    assert calls == []
    state.on_reset()
    assert calls == [hvd.size()]


def test_restore_without_a_commit_goes_back_to_the_state_as_built(state, rank):
    built = weights(state.model).clone()
    with torch.no_grad():
        for p in state.model.parameters():
            p.mul_(3.0)
    state.batch, state.note = 99, "changed"
    state.restore()
    assert torch.equal(weights(state.model), built)  # this rank's own, not rank 0's
    assert (state.epoch, state.batch, state.note) == (1, rank, "r%d" % rank)


def test_save_and_restore_are_local(state, rank):
    if rank == 0:  # a collective here would leave rank 0 waiting alone
        state.batch = 5
        state.save()
        state.batch = 6
        state.restore()
        assert state.batch == 5
    total = hvd.allreduce(torch.tensor([1.0]), op=hvd.Sum, name="elastic.local")
    assert total.item() == hvd.size()
    state.restore()
    assert state.batch == (5 if rank == 0 else rank)


def test_two_states_keep_their_own_snapshots(state, rank):
    other = hvd.elastic.TorchState(torch.nn.Linear(2, 2), epoch=30)
    state.commit()
    other.epoch = 31
    other.commit()
    other.epoch, state.epoch = 32, 8
    state.restore()
    other.restore()
    assert (state.epoch, other.epoch) == (1, 31)
    assert not hasattr(other, 'sampler')


def test_sync_lays_the_sampler_out_again_on_every_rank(state, rank, size):
    sampler = state.sampler  # 10 samples
    if rank == 0:
        sampler.record_batch(0, 1)  # rank 0 alone has processed `size` samples
    state.sync()
    assert sampler.processed_num == size
    assert len(sampler) == -(-(10 - size) // size)
    assert len(list(iter(sampler))) == len(sampler)
    state.restore()  # the synced state is the snapshot
    assert sampler.processed_num == size


def test_elastic_sampler_covers_the_rest_of_the_epoch(rank, size):
    dataset = list(range(23))
    sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=1)
    sampler.set_epoch(3)
    mine = list(iter(sampler))
    assert len(mine) == len(sampler) == -(-23 // size)
    everyone = hvd.allgather_object(mine)
    union = [i for part in everyone for i in part]
    assert sorted(set(union)) == dataset  # every sample, the padding repeats a few
    # After two steps of 2 samples per rank, the rest of the epoch, laid out again.
    order = list(iter(sampler))
    sampler.record_batch(0, 2)
    sampler.record_batch(1, 2)
    saved = sampler.state_dict()
    assert saved == {'epoch': 3, 'processed_num': 4 * size}
    other = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=1)
    other.load_state_dict(saved)
    rest = hvd.allgather_object(list(iter(other)))
    processed = {i for part in everyone for i in part[:4]}
    remaining = {i for part in rest for i in part}
    assert processed.isdisjoint(remaining)
    assert processed | remaining == set(dataset)
    assert order == mine  # iterating does not move the sampler
    sampler.set_epoch(4)
    assert sampler.processed_num == 0 and list(iter(sampler)) != mine


def test_resuming_a_commit_of_another_shape_names_what_is_missing(state, rank):
    state.commit()  # holds a sampler named 'sampler'
    bare = hvd.elastic.TorchState(torch.nn.Linear(3, 2), epoch=0)

    @hvd.elastic.run
    def train(s):
        raise AssertionError("resumed from a commit this state cannot hold")

    with pytest.raises(ValueError, match="ElasticSampler named 'sampler'"):
        train(bare)


class LoadsNowhereButRankZero(hvd.elastic.TorchState):
    def _load_bytes(self, data):
        if hvd.rank() != 0:
            raise ValueError("rank %d cannot load this state" % hvd.rank())
        super()._load_bytes(data)


def test_a_load_failing_on_some_ranks_fails_sync_on_every_rank(rank, size):
    if size < 2:
        pytest.skip("needs a rank that loads in a sync")
    picky = LoadsNowhereButRankZero(torch.nn.Linear(2, 2), epoch=rank)
    if rank == 0:
        expected = r"elastic sync \(loading rank 0's state\) failed on rank %d" % (size - 1)
        with pytest.raises(hvd.HorovodInternalError, match=expected):
            picky.sync()
    else:
        with pytest.raises(ValueError, match="rank %d cannot load this state" % rank):
            picky.sync()
    # Every rank left the sync: the next collective lines up.
    total = hvd.allreduce(torch.tensor([float(rank)]), op=hvd.Sum, name="elastic.after_failed_sync")
    assert total.item() == size * (size - 1) / 2
