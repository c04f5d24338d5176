"""DistributedOptimizer (Horovod's horovod.torch.optimizer): wraps any torch optimizer so that
step() uses gradients averaged over the ranks.

The wrapper is a subclass made on the fly of the user's optimizer class, carrying the user's
optimizer object's attributes (param_groups, state, defaults), so isinstance() checks, the
state_dict and the options behave as before. A hook on each parameter's gradient accumulator
submits the gradient's allreduce as soon as backward has accumulated it (on a host whose cores
the ranks fill, host gradients wait for the end of backward instead: see Note [Host gradients
wait for the end of backward on a full host]); step() (or synchronize()) submits what is left,
zeros for parameters whose gradient this rank did not compute (another rank may have), waits for
all of them, then runs the wrapped optimizer's step.
"""
import os
import warnings
from contextlib import contextmanager

import torch

from horovod import _horovodcpp as _C
from horovod.torch.adasum_optimizer import ADASUM_WRAPPER_METHODS
from horovod.torch.compression import Compression
from horovod.torch.functions import broadcast_object
from horovod.torch.gradient_hooks import GradientHooks, checked_named_parameters, wrapper_methods
from horovod.torch.mpi_ops import (Adasum, Average, allreduce_async_, global_process_set,
                                   grouped_allreduce_async_, local_size, size, sparse_allreduce_async, synchronize)


def _host_is_full():
    """Whether this host's ranks' compute threads fill the cores this process may run on.

    Note [Host gradients wait for the end of backward on a full host]: there the runtime's thread
    and the MPI transfers compete with backward for the cores, and an allreduce started during
    backward takes a whole time slice per yield; started together after backward (one
    hvd::SubmissionBatch), they run on cores the computation no longer needs. The LibTorch front
    end measured this (GradientOverlap in docs/torch.md); CUDA gradients always go at once.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return local_size() * torch.get_num_threads() >= cores


def _split_list(items, parts):
    """``items`` in ``parts`` contiguous chunks of nearly equal length (the first ones longer)."""
    count, extra = divmod(len(items), parts)
    chunks, start = [], 0
    for i in range(parts):
        end = start + count + (1 if i < extra else 0)
        if end > start:
            chunks.append(items[start:end])
        start = end
    return chunks


class _DistributedOptimizer(GradientHooks):
    """The methods the wrapper class adds; see DistributedOptimizer()."""
    _hvd_distributed = True

    def _hvd_setup(self, named_parameters, compression, backward_passes_per_step, op, gradient_predivide_factor,
                   groups, sparse_as_dense, process_set):
        self._compression = compression
        named_parameters = checked_named_parameters(self.param_groups, named_parameters)
        self._parameter_names = {v: k for k, v in sorted(named_parameters, key=lambda kv: kv[0])}
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {v: backward_passes_per_step for _, v in named_parameters}
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        self.sparse_as_dense = sparse_as_dense
        self.process_set = process_set
        self._handles = {}        # parameter (or tuple of a group's parameters) -> (handle, context)
        # Whether this rank reduces gradients (not outside the process set; at size 1 only when
        # elastic, since the job may grow).
        self._reduces = False
        self._synchronized = False
        self._should_synchronize = True
        self._setup_gradient_hooks()
        # See Note [Host gradients wait for the end of backward on a full host].
        self._defer_host_gradients = _host_is_full()

        if groups is not None:
            if not (isinstance(groups, list) or groups > 0):
                raise ValueError('groups should be a non-negative integer or a list of list of torch.Tensor.')
            if isinstance(groups, list):
                seen = set()
                for group in groups:
                    for p in group:
                        if not isinstance(p, torch.Tensor):
                            raise ValueError('groups must consist of torch.Tensor.')
                        if id(p) in seen:
                            raise ValueError('A parameter can only appear once in groups.')
                        seen.add(id(p))
        self._groups = groups
        self._p_to_group = {}
        self._group_counts = {}
        if self.process_set.included() and (size() > 1 or os.environ.get('HOROVOD_ELASTIC') == '1'):
            self._reduces = True
            if self._groups is not None:
                self._form_groups()
            self._trainable_now()  # hooks them

    def _form_groups(self):
        params = [p for group in self.param_groups for p in group['params'] if p.requires_grad]
        # Every rank forms the same groups in the same order: rank 0's parameter order decides.
        order = broadcast_object([self._parameter_names[p] for p in params], root_rank=0,
                                 process_set=self.process_set)
        params.sort(key=lambda p: order.index(self._parameter_names[p]))
        if isinstance(self._groups, list):
            ids = {id(p) for p in params}
            p_groups = [[p for p in group if id(p) in ids] for group in self._groups]
            grouped = {id(p) for group in p_groups for p in group}
            p_groups += [[p] for p in params if id(p) not in grouped]
        else:
            p_groups = _split_list(params, self._groups)
        for group in p_groups:
            group = tuple(group)
            if not group:
                continue
            for p in group:
                self._p_to_group[p] = group
            self._group_counts[group] = 0

    def _scale_factors(self):
        if self.op == Average:
            # Average divides by the set's size after the reduction; a predivide factor moves part
            # of it before.
            return 1.0 / self.gradient_predivide_factor, self.gradient_predivide_factor
        return 1.0, 1.0

    def _allreduce_grad_async(self, p):
        if p.grad is None:
            # This rank computed no gradient for p, but another may have: it submits zeros.
            p.grad = torch.zeros_like(p.data)
        name = self._parameter_names.get(p)
        tensor = p.grad
        if tensor.is_sparse:
            if self.sparse_as_dense:
                tensor = tensor.to_dense()
            else:
                return sparse_allreduce_async(tensor, name=name, op=self.op, process_set=self.process_set), None
        compressed, ctx = self._compression.compress(tensor)
        prescale, postscale = self._scale_factors()
        handle = allreduce_async_(compressed, name=name, op=self.op, prescale_factor=prescale,
                                  postscale_factor=postscale, process_set=self.process_set)
        return handle, ctx

    def _grouped_allreduce_grad_async(self, params):
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p.data)
        name = self._parameter_names.get(params[0])
        compressed, ctxs = zip(*[self._compression.compress(p.grad) for p in params])
        prescale, postscale = self._scale_factors()
        handle = grouped_allreduce_async_(list(compressed), name=name, op=self.op, prescale_factor=prescale,
                                          postscale_factor=postscale, process_set=self.process_set)
        return handle, ctxs

    def _gradient_ready(self, p):
        """Backward has accumulated ``p``'s gradient (the hook on its accumulator)."""
        if p in self._handles and self._handles[p][0] is not None and self._allreduce_delay[p] <= 0:
            raise AssertionError('Gradients were computed more than backward_passes_per_step times before '
                                 'call to step(). Increase backward_passes_per_step to accumulate gradients '
                                 'locally.')
        assert not p.grad.requires_grad
        assert self._allreduce_delay[p] > 0
        handle, ctx = None, None
        if self._allreduce_delay[p] == 1:
            self._hold([p])  # before any change: a refused gradient leaves this optimizer as it was
        self._allreduce_delay[p] -= 1
        if self._allreduce_delay[p] == 0:
            # A gradient left without a handle here goes out in synchronize().
            defer = self._defer_host_gradients and not p.grad.is_cuda
            group = self._p_to_group.get(p)  # none for a parameter unfrozen after the groups formed
            if group is not None:
                self._group_counts[group] += 1
                if self._group_counts[group] == len(group) and not defer:
                    self._handles[group] = self._grouped_allreduce_grad_async(group)
                    for gp in group:
                        self._handles.pop(gp, None)
                    self._group_counts[group] = 0
                    return
            elif not defer:
                handle, ctx = self._allreduce_grad_async(p)
        self._handles[p] = (handle, ctx)

    def synchronize(self):
        """Waits for every gradient's allreduce (submitting the ones backward did not reach on
        this rank) and puts the averaged gradients in place."""
        if not self.process_set.included():
            self._synchronized = True
            return
        submitted, unsent = set(), []
        for key, (handle, _) in self._handles.items():
            if handle is None:
                unsent.append(key)
            else:
                submitted.update(key if isinstance(key, tuple) else (key,))
        # Parameters whose allreduce is not out yet (held for the end of backward, no gradient on
        # this rank, unfrozen since the last step, or a group that backward completed only in
        # part) go now, in the optimizer's order (the same on every rank), grouped ones with the
        # rest of their group, as one batch. See Note [Parameters frozen or unfrozen after
        # wrapping] (gradient_hooks.py).
        pending = self._trainable_now(submitted) if self._reduces else []
        hook_did_not_run = [p for p in pending if p not in self._handles]  # before the unsent go
        for key in unsent:
            del self._handles[key]
        if pending:
            self._renew_replaced_hooks(hook_did_not_run)
            outgoing = [self._trainable_members(self._p_to_group.get(p) or (p,)) for p in pending]
            self._hold([gp for members in outgoing for gp in members])
            with _C.SubmissionBatch():
                for p, members in zip(pending, outgoing):
                    if p not in self._p_to_group:
                        self._handles[p] = self._allreduce_grad_async(p)
                    elif members not in self._handles:
                        self._handles[members] = self._grouped_allreduce_grad_async(members)
        waiting = list(self._handles.items())
        try:
            for done, (key, (handle, ctx)) in enumerate(waiting):
                self._write_back(key, handle, ctx)
        except BaseException:
            # The runtime still holds the names of the allreduces not waited for: wait for them
            # (their errors are this one's), so the names this optimizer releases are free.
            for _, (handle, _) in waiting[done + 1:]:
                try:
                    handle() if callable(handle) else synchronize(handle)
                except Exception:
                    pass
            raise
        finally:
            self._release_held()
        self._handles.clear()
        self._synchronized = True

    @staticmethod
    def _trainable_members(group):
        return tuple(p for p in group if p.requires_grad)

    def _write_back(self, key, handle, ctx):
        """Waits for one allreduce (a parameter's, or a group's when ``key`` is a tuple) and puts
        its result in the gradients."""
        if isinstance(key, tuple):  # a group's members that take part in this step
            outputs = synchronize(handle)
            for gp, output, gctx in zip(key, outputs, ctx):
                self._allreduce_delay[gp] = self.backward_passes_per_step
                gp.grad.set_(self._compression.decompress(output, gctx))
            self._group_counts[self._p_to_group[key[0]]] = 0
            return
        output = handle() if callable(handle) else synchronize(handle)
        self._allreduce_delay[key] = self.backward_passes_per_step
        if self._groups is not None and key in self._p_to_group:
            self._group_counts[self._p_to_group[key]] = 0
        if key.grad.is_sparse:
            aggregated = self._compression.decompress(output, ctx)
            if not aggregated.is_sparse:
                aggregated = aggregated.to_sparse()
            key.grad.zero_().add_(aggregated)  # sparse gradients have no set_()
        else:
            key.grad.set_(self._compression.decompress(output, ctx))

    @contextmanager
    def skip_synchronize(self):
        """step() inside this context does not synchronize (after an explicit synchronize(), e.g.
        to clip the averaged gradients)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn('optimizer.step() called without optimizer.skip_synchronize() context after '
                              'optimizer.synchronize(). This can cause training slowdown. You may want to consider '
                              'using optimizer.skip_synchronize() context if you use optimizer.synchronize() in '
                              'your code.')
            self.synchronize()
        self._synchronized = False
        return super(type(self), self).step(closure)

    def load_state_dict(self, *args, **kwargs):
        self._handles = {}
        self._release_held()
        self._synchronized = False
        self._should_synchronize = True
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step
        return super(type(self), self).load_state_dict(*args, **kwargs)


_WRAPPER_METHODS = wrapper_methods(GradientHooks, _DistributedOptimizer)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0, num_groups=0,
                         groups=None, sparse_as_dense=False, process_set=global_process_set):
    """Wraps ``optimizer`` so that step() uses gradients averaged (``op``) over the ranks of
    ``process_set``.

    named_parameters: model.named_parameters(), naming each gradient's allreduce (every parameter
        of the optimizer must be named; names must be unique). Without it, names come from the
        parameters' positions, the same on every rank.
    compression: Compression.none or Compression.fp16 for the gradients on the wire.
    backward_passes_per_step: backward passes accumulated locally before one allreduce.
    op: Average (default), Sum, or Adasum: then each rank steps on its own gradients and the
        parameters' changes are combined with Adasum (adasum_optimizer.py; groups, sparse_as_dense
        and gradient_predivide_factor do not apply, as in Horovod).
    gradient_predivide_factor: with Average, divide by this before the sum and by size/this after.
    groups: a number of groups to split the parameters into, or lists of parameters; each group's
        gradients go out as one grouped allreduce. num_groups is the deprecated name.
    sparse_as_dense: reduce sparse gradients as dense tensors (else they are allgathered).
    """
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError('gradient_predivide_factor not supported with op != Average')
    if num_groups != 0:
        warnings.warn('Parameter `num_groups` has been replaced by `groups` and will be removed in v0.23.0.',
                      DeprecationWarning)
        if groups is None:
            groups = num_groups
    base = type(optimizer)
    if op == Adasum:
        if groups is not None:
            warnings.warn('groups does not apply with op=hvd.Adasum: each parameter goes out on its own')
        cls = type(base.__name__, (base,), dict(ADASUM_WRAPPER_METHODS))
        wrapped = cls.__new__(cls)
        wrapped.__dict__.update(optimizer.__dict__)
        named = checked_named_parameters(wrapped.param_groups, named_parameters)
        wrapped._hvd_setup({v: k for k, v in named}, compression, backward_passes_per_step, process_set)
        return wrapped
    cls = type(base.__name__, (base,), dict(_WRAPPER_METHODS))
    wrapped = cls.__new__(cls)
    wrapped.__dict__.update(optimizer.__dict__)
    wrapped._hvd_setup(named_parameters, compression, backward_passes_per_step, op, gradient_predivide_factor,
                       groups, sparse_as_dense, process_set)
    return wrapped
