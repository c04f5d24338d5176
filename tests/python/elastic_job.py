"""An elastic job for elastic_relaunch.sh: a TorchState with a model, an optimizer, an
ElasticSampler and plain values, trained under hvd.elastic.run with a commit after each step.
    elastic_job.py STOP_AFTER_COMMIT OUT_FILE
With STOP_AFTER_COMMIT > 0, rank 0 raises SIGUSR1 (hvdrun's "hosts changed" notice) just before
that commit: the job must stop there on every rank with the exit code hvdrun relaunches on. The
last rank-0 process writes what it ran and the final weights to OUT_FILE."""
import json
import os
import signal
import sys

import torch

import horovod.torch as hvd

STEPS, GLOBAL_BATCH = 6, 4


def data():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(STEPS * GLOBAL_BATCH, 3, generator=g, dtype=torch.float64)
    return x, x @ torch.tensor([[1.0], [-2.0], [0.5]], dtype=torch.float64)


def reference():
    """One process on the union batch of every step."""
    x, y = data()
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1).double()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
    for step in range(STEPS):
        rows = slice(step * GLOBAL_BATCH, (step + 1) * GLOBAL_BATCH)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x[rows]), y[rows]).backward()
        opt.step()
    return model


def main():
    stop_after, out_file = int(sys.argv[1]), sys.argv[2]
    hvd.init()
    x, y = data()
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1).double()
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.5),
                                         named_parameters=model.named_parameters())
    sampler = hvd.elastic.ElasticSampler(list(range(len(x))), shuffle=False)
    state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, step=0, launches=[])
    resets = []
    state.register_reset_callbacks([lambda: resets.append(hvd.size())])

    @hvd.elastic.run
    def train(state):
        state.launches = state.launches + [(hvd.size(), state.step)]
        batch = GLOBAL_BATCH // hvd.size()
        mine = iter(state.sampler)  # this rank's share of the rest of the epoch, in order
        while state.step < STEPS:
            indices = [next(mine) for _ in range(batch)]  # its part of the next global batch
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(x[indices]), y[indices]).backward()
            optimizer.step()
            state.sampler.record_batch(0, batch)
            state.step += 1
            if state.step == stop_after and hvd.rank() == 0:
                os.kill(os.getpid(), signal.SIGUSR1)
            state.commit()
        return model

    train(state)
    if hvd.rank() == 0:
        ref = reference()
        with open(out_file, 'w') as f:
            json.dump({'launches': state.launches, 'resets': resets, 'step': state.step,
                       'weights': [p.detach().flatten().tolist() for p in model.parameters()],
                       'reference': [p.detach().flatten().tolist() for p in ref.parameters()]}, f)


if __name__ == '__main__':
    main()
