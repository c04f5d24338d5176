"""The arguments every collective shares: Horovod's reduce ops, its rule for the deprecated
``average``, the registered id of a process set, and whether a call needs autograd."""
import warnings

import torch

# Reduce ops, with Horovod's values. Adasum: allreduce of floating-point tensors on a power-of-two
# number of ranks (README, "Adasum").
Average, Sum, Adasum, Min, Max, Product = 0, 1, 2, 3, 4, 5


def op_of(op, average):
    """Horovod's rule for the deprecated ``average`` argument."""
    if average is None:
        return Average if op is None else op
    if op is not None:
        if average is not None:
            raise ValueError('The op parameter supersedes average. Please provide only one of them.')
        return op
    if average is not None:
        warnings.warn('Parameter `average` has been replaced with `op` and will be removed in v1.0',
                      DeprecationWarning)
        return Average if average else Sum
    return Average


def set_id(process_set):
    ps_id = process_set.process_set_id
    if ps_id is None:
        raise ValueError("%s is not registered: pass it to hvd.init(process_sets=...) or "
                         "hvd.add_process_set() first" % process_set)
    return ps_id


def needs_grad(*tensors):
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
