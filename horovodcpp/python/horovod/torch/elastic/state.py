"""TorchState (Horovod's horovod.torch.elastic.TorchState): a model, an optimizer, samplers and
any other picklable values, committed and restored together (horovod.common.elastic.State)."""
import io

import torch

from horovod import _horovodcpp as _C
from horovod.common.elastic import State
from horovod.torch.elastic.sampler import ElasticSampler
from horovod.torch.mpi_ops import size


class TorchState(State):
    """``TorchState(model, optimizer, epoch=0, batch=0, sampler=sampler)``: the model's and the
    optimizer's state_dict, each ElasticSampler's progress, and the other keyword values (read and
    set as attributes: ``state.epoch += 1``) make up the state."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        super().__init__(_C)
        object.__setattr__(self, 'model', model)
        object.__setattr__(self, 'optimizer', optimizer)
        object.__setattr__(self, '_values', dict(kwargs))
        self.save()

    def __getattr__(self, name):
        values = self.__dict__.get('_values', {})
        if name in values:
            return values[name]
        raise AttributeError("'TorchState' has no attribute %r" % name)

    def __setattr__(self, name, value):
        if name in ('model', 'optimizer') or name.startswith('_'):
            object.__setattr__(self, name, value)
        else:
            self._values[name] = value

    def _size(self):
        return size()

    def _save_bytes(self):
        state = {'values': {}, 'samplers': {}}
        if self.model is not None:
            state['model'] = self.model.state_dict()
        if self.optimizer is not None:
            state['optimizer'] = self.optimizer.state_dict()
        for name, value in self._values.items():
            if isinstance(value, ElasticSampler):
                state['samplers'][name] = value.state_dict()
            else:
                state['values'][name] = value
        buffer = io.BytesIO()
        torch.save(state, buffer)
        return buffer.getvalue()

    def _load_bytes(self, data):
        # The bytes are this job's own commit. PyTorch 2.6 made weights_only=True the default, which
        # refuses tracked values of other classes (TorchState takes any picklable value).
        state = torch.load(io.BytesIO(data), weights_only=False)
        if self.model is not None and 'model' in state:
            self.model.load_state_dict(state['model'])
        if self.optimizer is not None and 'optimizer' in state:
            self.optimizer.load_state_dict(state['optimizer'])
        for name, sampler_state in state['samplers'].items():
            sampler = self._values.get(name)
            if not isinstance(sampler, ElasticSampler):
                raise ValueError("TorchState: the state being loaded has an ElasticSampler named %r, "
                                 "which this TorchState does not hold (it holds %s)"
                                 % (name, sorted(self._values) or "no named values"))
            sampler.load_state_dict(sampler_state)
        self._values.update(state['values'])

    def _relayout(self):
        # Rank 0 keeps its own state through a sync, and a load lays a sampler out again only
        # on the ranks that loaded: every rank lays out the rest of the epoch the same way.
        for value in self._values.values():
            if isinstance(value, ElasticSampler):
                value.reset()
