"""Elastic training with horovod.torch (Horovod's horovod.torch.elastic) on horovodcpp's
relaunch-and-resume model (docs/elastic.md):

    state = hvd.elastic.TorchState(model, optimizer, epoch=0, batch=0)

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            ...
            state.commit()

    train(state)
"""
from horovod import _horovodcpp as _C
from horovod.common.elastic import run_fn
from horovod.torch.elastic.sampler import ElasticSampler
from horovod.torch.elastic.state import TorchState
from horovod.torch.mpi_ops import init, is_initialized, shutdown


def run(func):
    """Decorates ``func(state, ...)``: initializes horovodcpp if needed, resumes ``state`` from
    the newest commit, calls ``func``; when a commit stops the run for a change of hosts, shuts
    down and exits with the code hvdrun relaunches on. Any other exception propagates (hvdrun
    then relaunches without the failed slot)."""
    return run_fn(func, init, shutdown, is_initialized, _C.HOSTS_CHANGED_EXIT_CODE)


__all__ = ['TorchState', 'ElasticSampler', 'run']
