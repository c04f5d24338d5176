"""DistributedOptimizer(op=hvd.Adasum): Horovod's Adasum optimizer.

Adasum needs the full magnitude of each rank's update, not its gradient (Horovod's docs, "The
Distributed Optimizer for AdaSum"): each rank steps the wrapped optimizer on its own gradients,
one parameter at a time as backward completes it, and the parameter's change (its delta) goes out
in an Adasum allreduce; step() then moves every parameter from where it was before that local
step by the combined delta, the same on every rank. The wrapped optimizer's state (momentum,
Adam's moments) stays each rank's own, as in Horovod. synchronize() does nothing and
skip_synchronize() is refused, as in Horovod: the reduced values are parameters, not gradients.
"""
from contextlib import contextmanager

import torch

from horovod import _horovodcpp as _C
from horovod.torch.gradient_hooks import GradientHooks, wrapper_methods
from horovod.torch.mpi_ops import Adasum, allreduce_async_, synchronize


class _DistributedAdasumOptimizer(GradientHooks):
    """The methods the wrapper class adds; see DistributedOptimizer(op=Adasum)."""
    _hvd_distributed = True

    def _hvd_setup(self, parameter_names, compression, backward_passes_per_step, process_set):
        self._parameter_names = parameter_names
        self._compression = compression
        self.backward_passes_per_step = backward_passes_per_step
        self.process_set = process_set
        self._setup_gradient_hooks()
        self._allreduce_delay = {p: backward_passes_per_step for p in parameter_names}
        self._handles = {}    # parameter -> (handle, compression context); handle None: not out yet
        self._starts = {}     # parameter -> its value before this step's local update
        self._synchronized = False
        self._should_synchronize = True
        if self.process_set.included():
            self._trainable_now()  # hooks them

    def _gradient_ready(self, p):
        if p in self._handles and self._allreduce_delay[p] <= 0:
            raise AssertionError('Gradients were computed more than backward_passes_per_step times before call to '
                                 'step(). Increase backward_passes_per_step to accumulate gradients locally.')
        assert self._allreduce_delay[p] > 0
        if self._allreduce_delay[p] == 1:
            self._hold([p])  # before any change, as the averaging optimizer does
        self._allreduce_delay[p] -= 1
        self._handles[p] = self._reduce_delta_async(p) if self._allreduce_delay[p] == 0 else (None, None)

    def _local_step(self, p):
        """The wrapped optimizer's step on ``p`` alone."""
        stashed = [group['params'] for group in self.param_groups]
        for group in self.param_groups:
            group['params'] = [q for q in group['params'] if q is p]
        try:
            super(type(self), self).step()
        finally:
            for group, params in zip(self.param_groups, stashed):
                group['params'] = params

    def _reduce_delta_async(self, p):
        """Steps ``p`` locally, then starts the Adasum of its delta; ``p`` holds the delta (and
        then the combined delta) until step() puts the parameter back together."""
        with torch.no_grad():
            start = self._starts.get(p)
            if start is None:
                start = self._starts[p] = torch.empty_like(p, memory_format=torch.contiguous_format)
            start.copy_(p)
            self._local_step(p)
            p.sub_(start)
            compressed, ctx = self._compression.compress(p.data)
            if not compressed.is_contiguous():
                compressed = compressed.contiguous()
            handle = allreduce_async_(compressed, name=self._parameter_names[p], op=Adasum,
                                      process_set=self.process_set)
        return handle, (ctx, compressed)

    def synchronize(self):
        """Nothing to do before step(): the Adasum optimizer reduces parameter deltas, not gradients."""

    @contextmanager
    def skip_synchronize(self):
        raise AssertionError("Skipping synchronization is not supported when using Adasum optimizer.")
        yield  # noqa: unreachable (a generator for contextmanager)

    def step(self, closure=None):
        if not self.process_set.included():
            return super(type(self), self).step(closure)  # outside the set: a plain local step
        loss = closure() if closure is not None else None
        # Parameters whose delta is not out yet (no gradient on this rank, fewer passes than
        # backward_passes_per_step, or unfrozen since the last step) go now, in the optimizer's
        # order, as one batch; frozen ones take no part (Note [Parameters frozen or unfrozen
        # after wrapping] in gradient_hooks.py).
        pending = self._trainable_now({p for p, (handle, _) in self._handles.items() if handle is not None})
        if pending:
            self._renew_replaced_hooks([p for p in pending if p not in self._handles])
            self._hold(pending)
            with _C.SubmissionBatch():
                for p in pending:
                    self._handles[p] = self._reduce_delta_async(p)
        try:
            with torch.no_grad():
                for p, (handle, context) in self._handles.items():
                    if handle is None:  # frozen between the backward passes of this step
                        self._allreduce_delay[p] = self.backward_passes_per_step
                        continue
                    ctx, _ = context
                    delta = self._compression.decompress(synchronize(handle), ctx)
                    start = self._starts[p]
                    start.add_(delta.view_as(start))
                    p.copy_(start)
                    self._allreduce_delay[p] = self.backward_passes_per_step
        finally:
            self._release_held()
        self._handles.clear()
        return loss


ADASUM_WRAPPER_METHODS = wrapper_methods(GradientHooks, _DistributedAdasumOptimizer)
