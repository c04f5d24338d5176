"""DistributedOptimizer, broadcast_parameters/broadcast_optimizer_state and SyncBatchNorm: a
Horovod-style training run on N ranks ends where one process training on the union of their
batches ends."""
import copy
import time
import warnings
import weakref

import pytest
import torch
import torch.nn.functional as F

import horovod.torch as hvd


def mnist_like(samples, seed=7):
    """MNIST-shaped data: ten class prototypes (8x8 images) plus noise, the same on every rank."""
    g = torch.Generator().manual_seed(seed)
    prototypes = torch.randn(10, 1, 8, 8, generator=g, dtype=torch.float64)
    labels = torch.randint(0, 10, (samples,), generator=g)
    images = prototypes[labels] + 0.5 * torch.randn(samples, 1, 8, 8, generator=g, dtype=torch.float64)
    return images, labels


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3)
        self.fc1 = torch.nn.Linear(4 * 6 * 6, 16)
        self.fc2 = torch.nn.Linear(16, 10)

    def forward(self, x):
        x = F.relu(self.conv(x))
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def train(model, optimizer, scheduler, images, labels, batch, steps, shard):
    """Horovod-style loop; ``shard(rows)`` picks this rank's rows of each global batch."""
    for step in range(steps):
        rows = torch.arange(step * batch, (step + 1) * batch) % images.shape[0]
        mine = shard(rows)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(images[mine]), labels[mine])
        loss.backward()
        optimizer.step()
        scheduler.step()
    return model


def test_training_equals_one_process_on_the_union_batch(rank, size):
    images, labels = mnist_like(256)
    batch, steps = 8 * size, 12
    torch.manual_seed(100 + rank)  # every rank starts from different weights ...
    model = Net().double()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1 * (rank + 1), momentum=0.9, weight_decay=1e-3)
    if rank > 0:  # ... and other optimizer state: broadcast_optimizer_state makes it rank 0's
        model(images[:2]).sum().backward()
        optimizer.step()
        optimizer.zero_grad()
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    assert optimizer.param_groups[0]['lr'] == pytest.approx(0.1)
    start = copy.deepcopy(model)
    distributed = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    scheduler = torch.optim.lr_scheduler.StepLR(distributed, step_size=5, gamma=0.5)
    train(model, distributed, scheduler, images, labels, batch, steps, lambda rows: rows[rank::size])

    reference = start  # rank 0's starting weights, and rank 0's (fresh) optimizer
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)
    ref_sched = torch.optim.lr_scheduler.StepLR(ref_opt, step_size=5, gamma=0.5)
    train(reference, ref_opt, ref_sched, images, labels, batch, steps, lambda rows: rows)
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        assert torch.allclose(p, q, rtol=1e-9, atol=1e-12), name
    assert distributed.param_groups[0]['lr'] == pytest.approx(0.1 * 0.25)
    # Every rank holds the same weights.
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    assert torch.equal(hvd.broadcast(flat, 0, name="train.check"), flat)


@pytest.mark.parametrize("during_backward", [False, True], ids=["after_backward", "during_backward"])
@pytest.mark.parametrize("options", [
    dict(),
    dict(backward_passes_per_step=2),
    dict(groups=2),
    dict(groups=None, gradient_predivide_factor=2.0),
    dict(op=hvd.Sum),
], ids=["plain", "accumulate", "groups", "predivide", "sum"])
def test_optimizer_options_match_the_reference(options, during_backward, rank, size):
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 1)).double()
    reference = copy.deepcopy(model)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05),
                                   named_parameters=model.named_parameters(), **options)
    # Both ways a host gradient goes out: as backward reaches it (a host with cores to spare) or
    # after backward (one batch, on a host the ranks fill, as CI's is).
    opt._defer_host_gradients = not during_backward
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.05)
    passes = options.get('backward_passes_per_step', 1)
    g = torch.Generator().manual_seed(11)
    for step in range(4):
        opt.zero_grad()
        ref_opt.zero_grad()
        for _ in range(passes):
            x = torch.randn(size * 4, 5, generator=g, dtype=torch.float64)
            y = x.sum(1, keepdim=True)
            F.mse_loss(model(x[rank * 4:(rank + 1) * 4]), y[rank * 4:(rank + 1) * 4]).backward()
            reference_loss = F.mse_loss(reference(x), y)
            if options.get('op') == hvd.Sum:
                reference_loss = reference_loss * size  # Sum of the ranks' mean losses
            reference_loss.backward()
        opt.step()
        ref_opt.step()
    for p, q in zip(model.parameters(), reference.parameters()):
        assert torch.allclose(p, q, rtol=1e-9, atol=1e-12)


def test_fp16_compression_stays_close(rank):
    torch.manual_seed(5)
    model = torch.nn.Linear(6, 3)
    reference = copy.deepcopy(model)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(), compression=hvd.Compression.fp16)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    x = torch.randn(hvd.size() * 3, 6, generator=torch.Generator().manual_seed(1))
    F.mse_loss(model(x[rank * 3:(rank + 1) * 3]), torch.zeros(3, 3)).backward()
    F.mse_loss(reference(x), torch.zeros(hvd.size() * 3, 3)).backward()
    opt.step()
    ref_opt.step()
    for p, q in zip(model.parameters(), reference.parameters()):
        assert p.dtype == torch.float32
        assert torch.allclose(p, q, rtol=1e-3, atol=1e-4)


def test_parameters_without_a_gradient_on_some_ranks(rank, size):
    # Rank 0 never uses `unused`; the others do: rank 0 sends zeros so every rank agrees.
    used = torch.nn.Linear(2, 2)
    unused = torch.nn.Linear(2, 2)
    params = list(used.named_parameters(prefix='used')) + list(unused.named_parameters(prefix='unused'))
    opt = hvd.DistributedOptimizer(torch.optim.SGD([p for _, p in params], lr=1.0), named_parameters=params)
    x = torch.ones(1, 2)
    loss = used(x).sum() + (unused(x).sum() if rank > 0 else 0)
    before = unused.weight.detach().clone()
    loss.backward()
    opt.step()
    # d(sum)/dW = 1 on the ranks that used it, averaged with rank 0's zeros.
    assert torch.allclose(unused.weight, before - (size - 1) / size)


def test_a_model_changed_in_place_after_wrapping_keeps_reducing_during_backward(rank, size):
    """p.data replaced (module.to(), a layer grown in place): the hooks move to the parameters'
    new gradient accumulators at zero_grad(), so gradients are again reduced while backward runs,
    and a new shape trains instead of failing inside backward."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(4, 3)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(layer.parameters(), lr=0.5),
                                   named_parameters=layer.named_parameters())
    mean_factor = (size + 1) / 2.0  # the mean over ranks of (rank + 1)
    x = torch.ones(2, 4)
    for change in ("dtype", "shape"):
        if change == "dtype":
            layer.to(torch.float64)
            x = x.double()
        else:
            with torch.no_grad():
                layer.weight.data = torch.ones(5, 4, dtype=torch.float64)
                layer.bias.data = torch.zeros(5, dtype=torch.float64)
            for p in layer.parameters():
                p.grad = None  # as plain PyTorch needs: the old gradients have the old shape
        opt.zero_grad()
        layer(x * (rank + 1)).sum().backward()
        if size > 1:  # started by the hooks, not left for synchronize()
            assert set(opt._handles) == set(layer.parameters()), change
        opt.step()
        rows = layer.weight.shape[0]
        assert layer.weight.grad.dtype == torch.float64
        assert torch.allclose(layer.weight.grad, torch.full((rows, 4), 2 * mean_factor, dtype=torch.float64)), change
        assert torch.allclose(layer.bias.grad, torch.full((rows,), 2.0, dtype=torch.float64)), change
    assert torch.allclose(layer.bias, torch.full((5,), -1.0, dtype=torch.float64))


@pytest.mark.parametrize("op", [hvd.Average, hvd.Adasum], ids=["average", "adasum"])
def test_a_model_cast_after_wrapping_and_zeroed_through_the_model_reduces_during_backward_again(op, rank, size):
    """module.to(float64) after wrapping, with model.zero_grad() (the optimizer's zero_grad() never
    runs, so it cannot renew the hooks there): the first step's gradients wait for step(), which
    moves the hooks, and from the next backward on they go out while backward runs again."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(4, 3)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(layer.parameters(), lr=0.5),
                                   named_parameters=layer.named_parameters(), op=op)
    layer.to(torch.float64)
    start = layer.bias.detach().clone()
    x = torch.ones(2, 4, dtype=torch.float64)
    for step in range(3):
        layer.zero_grad()
        layer(x if op == hvd.Adasum else x * (rank + 1)).sum().backward()
        hooked = set(opt._handles)
        opt.step()
        if size > 1:  # one rank registers no hooks
            assert hooked == (set() if step == 0 else set(layer.parameters())), step
        if op == hvd.Average:  # the mean over ranks of (rank + 1), twice (two rows of ones)
            assert torch.allclose(layer.weight.grad, torch.full((3, 4), size + 1.0, dtype=torch.float64)), step
    # The bias's gradient is 2 on every rank (Adasum: identical updates, combined into that
    # update): three steps of 0.5 * 2.
    assert torch.allclose(layer.bias, start - 3.0, atol=1e-12)


@pytest.mark.parametrize("during_backward", [False, True], ids=["after_backward", "during_backward"])
@pytest.mark.parametrize("options", [dict(), dict(groups=2), dict(op=hvd.Adasum)], ids=["plain", "groups", "adasum"])
def test_layers_frozen_or_unfrozen_after_wrapping_train_as_one_process(options, during_backward, rank, size):
    """Fine-tuning's schedule on a wrapped optimizer: the first layer frozen at construction and
    unfrozen after two steps, the last layer's weight frozen after four. Averaging: one process on the union
    batch; Adasum: every rank on the same batch (parallel updates combine into that update).
    Before Note [Parameters frozen or unfrozen after wrapping], as in Horovod, the unfrozen layer
    stepped on each rank's own gradients, and the frozen one on zeros (weight decay moved it)."""
    adasum = options.get('op') == hvd.Adasum
    torch.manual_seed(4)
    model = torch.nn.Sequential(torch.nn.Linear(5, 6), torch.nn.Tanh(), torch.nn.Linear(6, 4), torch.nn.Tanh(),
                                torch.nn.Linear(4, 1)).double()
    reference = copy.deepcopy(model)
    model[0].requires_grad_(False)
    reference[0].requires_grad_(False)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=0.1),
                                   named_parameters=model.named_parameters(), **options)
    opt._defer_host_gradients = not during_backward  # both ways a host gradient goes out
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.05, momentum=0.9, weight_decay=0.1)
    g = torch.Generator().manual_seed(12)
    first_layer = model[0].weight.detach().clone()
    for step in range(7):
        if step == 2:
            model[0].requires_grad_(True)
            reference[0].requires_grad_(True)
        if step == 4:  # the weight alone: with groups=2, its group's other member (the bias) goes on
            model[4].weight.requires_grad_(False)
            reference[4].weight.requires_grad_(False)
            frozen_value = model[4].weight.detach().clone()
        # set_to_none: a frozen layer keeps no gradient, so plain SGD skips it (no weight decay)
        opt.zero_grad(set_to_none=True)
        ref_opt.zero_grad(set_to_none=True)
        x = torch.randn(size * 3, 5, generator=g, dtype=torch.float64)
        y = x.sum(1, keepdim=True)
        mine = slice(None) if adasum else slice(rank * 3, (rank + 1) * 3)
        F.mse_loss(model(x[mine]), y[mine]).backward()
        F.mse_loss(reference(x), y).backward()
        if step >= 3 and size > 1 and during_backward and not options:
            # the unfrozen layer's gradients now go out during backward, like the rest
            assert model[0].weight in opt._handles and opt._handles[model[0].weight][0] is not None
        opt.step()
        ref_opt.step()
        if step < 2:
            assert torch.equal(model[0].weight, first_layer)
        if step >= 4:
            assert torch.equal(model[4].weight, frozen_value), step
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        assert torch.allclose(p, q, rtol=1e-9, atol=1e-12), name
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    assert torch.equal(hvd.broadcast(flat, 0, name="frozen.check"), flat)


def test_a_parameter_unnamed_at_construction_is_refused_when_it_trains(rank, size):
    layer, extra = torch.nn.Linear(2, 2), torch.nn.Linear(2, 1)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(layer.parameters(), lr=0.1),
                                   named_parameters=layer.named_parameters())
    opt.add_param_group({'params': list(extra.parameters())})
    extra(layer(torch.ones(1, 2))).sum().backward()
    if size == 1:
        opt.step()  # one rank reduces nothing: nothing to name
        return
    with pytest.raises(ValueError, match=r"2 trainable parameter\(s\), first one of shape \(1, 2\), are not among the "
                                         r"named_parameters given at construction"):
        opt.step()


@pytest.mark.needs_ranks(2)  # one rank reduces nothing (no hooks, as in Horovod): nothing to refuse
def test_synchronize_skip_synchronize_and_the_warning():
    model = torch.nn.Linear(3, 1)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    model(torch.ones(2, 3)).sum().backward()
    with pytest.raises(AssertionError, match="zero_grad"):
        opt.zero_grad()
    opt.synchronize()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.01)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        with opt.skip_synchronize():
            opt.step()
        assert not caught
    opt.zero_grad()
    model(torch.ones(2, 3)).sum().backward()
    opt.synchronize()
    with pytest.warns(UserWarning, match="optimizer.step\\(\\) called without optimizer.skip_synchronize"):
        opt.step()
    assert isinstance(opt, torch.optim.SGD)
    assert sorted(opt._parameter_names.values()) == ['bias', 'weight']


@pytest.mark.needs_ranks(2)  # one rank holds no gradient names: nothing is reduced
@pytest.mark.parametrize("during_backward", [False, True], ids=["after_backward", "during_backward"])
def test_two_optimizers_of_one_name_are_refused_alike_on_every_rank(during_backward, rank, size):
    # Two models whose parameters share names ("weight", "bias"), both backward before either
    # steps. Rank 0 comes late to the second backward: the first model's allreduces have
    # completed there, not yet on the others. The second optimizer is refused on every rank, at
    # the same point, and neither model gets the other's gradient.
    first, second = torch.nn.Linear(4, 1).double(), torch.nn.Linear(4, 1).double()
    opts = [hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), named_parameters=m.named_parameters())
            for m in (first, second)]
    for opt in opts:
        opt._defer_host_gradients = not during_backward
    x = torch.full((2, 4), float(rank + 1), dtype=torch.float64)
    first(x).sum().backward()
    if rank == 0:
        time.sleep(0.3)
    with pytest.raises(ValueError, match="the gradient of parameter '(weight|bias)' is held by another "
                                         "DistributedOptimizer"):
        (2 * second(x)).sum().backward()
    opts[0].step()
    # d(sum of rows)/dW on rank r is 2 (r + 1) per element; averaged over the ranks: size + 1.
    assert torch.equal(first.weight.grad, torch.full((1, 4), float(size + 1), dtype=torch.float64))
    assert torch.equal(first.bias.grad, torch.full((1,), 2.0, dtype=torch.float64))
    # The first optimizer has written its gradients back: the names are free again.
    opts[1].zero_grad()
    (2 * second(x)).sum().backward()
    opts[1].step()
    assert torch.equal(second.weight.grad, torch.full((1, 4), 2.0 * (size + 1), dtype=torch.float64))
    assert torch.equal(second.bias.grad, torch.full((1,), 4.0, dtype=torch.float64))


@pytest.mark.parametrize("during_backward", [False, True], ids=["after_backward", "during_backward"])
def test_wrapping_the_model_again_replaces_the_dropped_optimizer(during_backward, rank, size):
    # A program that wraps its model's optimizer again (new options, a new epoch) and drops the
    # old one: only the new one reduces from then on, and every step averages over the ranks.
    model = torch.nn.Linear(4, 1).double()
    torch.nn.init.zeros_(model.weight)
    torch.nn.init.zeros_(model.bias)
    x = torch.full((2, 4), float(rank + 1), dtype=torch.float64)

    def wrap(lr):
        opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=lr),
                                       named_parameters=model.named_parameters())
        opt._defer_host_gradients = not during_backward
        return opt

    def step(opt):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
        # d(sum of rows)/dW on rank r is 2 (r + 1) per element; averaged over the ranks: size + 1.
        assert torch.equal(model.weight.grad, torch.full((1, 4), float(size + 1), dtype=torch.float64))
        assert torch.equal(model.bias.grad, torch.full((1,), 2.0, dtype=torch.float64))

    opt = wrap(0.5)
    step(opt)
    dropped = weakref.ref(opt)
    opt = wrap(0.25)
    assert dropped() is None
    for _ in range(3):
        step(opt)
    # One step at lr 0.5 and three at 0.25, each by the averaged gradient.
    assert torch.allclose(model.weight, torch.full((1, 4), -1.25 * (size + 1), dtype=torch.float64))
    assert torch.allclose(model.bias, torch.full((1,), -2.5, dtype=torch.float64))


def test_unnamed_parameters_get_the_same_names_everywhere():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))
    opt = hvd.DistributedOptimizer(torch.optim.SGD([{'params': model[0].parameters()},
                                                    {'params': model[1].parameters(), 'lr': 0.5}], lr=0.1))
    names = sorted(opt._parameter_names.values())
    assert len(set(names)) == 4
    assert all(n == names for n in hvd.allgather_object(names))


def test_sparse_gradients_as_sparse_and_as_dense(rank, size):
    for sparse_as_dense in (False, True):
        torch.manual_seed(0)
        emb = torch.nn.Embedding(6, 2, sparse=True)
        start = emb.weight.detach().clone()
        opt = hvd.DistributedOptimizer(torch.optim.SGD(emb.parameters(), lr=1.0),
                                       named_parameters=emb.named_parameters(), sparse_as_dense=sparse_as_dense)
        emb(torch.tensor([rank % 6, 5])).sum().backward()
        opt.step()
        want = start.clone()
        for r in range(size):
            want[r % 6] -= 1.0 / size
        want[5] -= 1.0
        assert torch.allclose(emb.weight, want), "sparse_as_dense=%s" % sparse_as_dense


def test_broadcast_optimizer_state_keeps_types_and_leaves_parameters(rank):
    model = torch.nn.Linear(4, 2)
    params = dict(lr=0.1, betas=(0.9, 0.999)) if rank == 0 else dict(lr=0.3, betas=(0.5, 0.6))
    opt = torch.optim.Adam(model.parameters(), **params)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    if rank == 0:
        model(torch.ones(1, 4)).sum().backward()
        opt.step()
    before = [p.detach().clone() for p in model.parameters()]
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert opt.param_groups[0]['betas'] == (0.9, 0.999) and type(opt.param_groups[0]['betas']) is tuple
    assert opt.param_groups[0]['lr'] == 0.1
    state = opt.state[model.weight]
    assert set(state) == {'step', 'exp_avg', 'exp_avg_sq'}
    gathered = hvd.allgather_object({k: (v.tolist() if torch.is_tensor(v) else v) for k, v in state.items()})
    assert all(g == gathered[0] for g in gathered)
    if rank != 0:  # no step was taken to create the state: the parameters are as they were
        assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before))


@pytest.mark.parametrize("shape", [(3, 4), (2, 4, 5)])
def test_sync_batch_norm_equals_batch_norm_on_the_union_batch(shape, rank, size):
    g = torch.Generator().manual_seed(9)
    union = torch.randn(size * shape[0], *shape[1:], generator=g, dtype=torch.float64) * 3 + 1
    sync = hvd.SyncBatchNorm(4).double()
    plain = torch.nn.BatchNorm1d(4).double()
    with torch.no_grad():
        sync.weight.copy_(torch.arange(1.0, 5.0))
        plain.weight.copy_(torch.arange(1.0, 5.0))
    mine = union[rank * shape[0]:(rank + 1) * shape[0]].clone().requires_grad_()
    everything = union.clone().requires_grad_()
    out = sync(mine)
    ref = plain(everything)
    assert torch.allclose(out, ref[rank * shape[0]:(rank + 1) * shape[0]])
    assert torch.allclose(sync.running_mean, plain.running_mean)
    assert torch.allclose(sync.running_var, plain.running_var)
    w = torch.arange(out.numel(), dtype=torch.float64).view(out.shape)
    w_all = torch.cat([w + 100 * r for r in range(size)])
    (out * (w + 100 * rank)).sum().backward()
    (ref * w_all).sum().backward()
    assert torch.allclose(mine.grad, everything.grad[rank * shape[0]:(rank + 1) * shape[0]])
    assert torch.allclose(hvd.allreduce(sync.weight.grad, op=hvd.Sum, name="bn.w"), plain.weight.grad)
    assert torch.allclose(hvd.allreduce(sync.bias.grad, op=hvd.Sum, name="bn.b"), plain.bias.grad)
    sync.eval()
    plain.eval()
    assert torch.allclose(sync(mine), plain(mine))
