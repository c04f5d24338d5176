"""Broadcasting parameters, optimizer state and Python objects (Horovod's
horovod.torch.functions). Every function here is a collective: call it on every rank."""
import io

import cloudpickle
import torch

from horovod.torch.mpi_ops import (allgather, broadcast_, broadcast_async_, global_process_set, rank, size,
                                   synchronize)


def broadcast_parameters(params, root_rank, prefix=None):
    """Overwrites every rank's parameters with root's, in place: ``params`` is a state_dict (or any
    dict of tensors), model.named_parameters() or a list of tensors. Named entries are broadcast
    by name, unnamed ones in list order."""
    if isinstance(params, dict):
        params = sorted(params.items())
    elif isinstance(params, list) or hasattr(params, "__iter__"):
        params = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        raise ValueError('invalid params of type: %s' % type(params))
    handles = []
    for name, p in params:
        if p is None:
            continue
        full = None if name is None else (name if prefix is None else prefix + name)
        handles.append(broadcast_async_(p, root_rank, full))
    for handle in handles:
        synchronize(handle)


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """Returns root's ``obj`` on every rank of the set (pickled with cloudpickle, sent as bytes).
    ``root_rank`` is a global rank. The default name is the same on every rank whatever each
    passes (Horovod names it after the object's type, so a None on the other ranks would hang)."""
    if name is None:
        name = 'broadcast_object'

    if rank() == root_rank:
        payload = cloudpickle.dumps(obj)
        data = torch.frombuffer(bytearray(payload), dtype=torch.uint8) if payload else torch.empty(0, dtype=torch.uint8)
        length = torch.tensor([data.numel()], dtype=torch.int64)
        broadcast_(length, root_rank, name + '.sz', process_set)
    else:
        length = torch.zeros(1, dtype=torch.int64)
        broadcast_(length, root_rank, name + '.sz', process_set)
        data = torch.empty(int(length[0]), dtype=torch.uint8)
    broadcast_(data, root_rank, name + '.t', process_set)
    if rank() == root_rank:
        return obj
    return cloudpickle.loads(data.numpy().tobytes())


def allgather_object(obj, name=None, process_set=global_process_set):
    """Returns the list of every rank's ``obj``, in rank order (pickled with cloudpickle). The
    default name is the same on every rank, whatever the objects' types."""
    if name is None:
        name = 'allgather_object'

    payload = cloudpickle.dumps(obj)
    data = torch.frombuffer(bytearray(payload), dtype=torch.uint8)
    sizes = allgather(torch.tensor([data.numel()], dtype=torch.int64), name=name + '.sz',
                      process_set=process_set).tolist()
    gathered = allgather(data, name=name + '.t', process_set=process_set).numpy().tobytes()
    objects, start = [], 0
    for n in sizes:
        objects.append(cloudpickle.loads(gathered[start:start + n]))
        start += n
    return objects


def _zero_missing_gradients(optimizer, sparse_params):
    """Gives every trainable parameter without a gradient a zero one, as Horovod does for a
    fresh optimizer (scripts go on to use p.grad)."""
    for group in optimizer.param_groups:
        for p in group['params']:
            if p.requires_grad and p.grad is None:
                grad = torch.zeros_like(p.data)
                if isinstance(optimizer, torch.optim.SparseAdam) or id(p) in sparse_params:
                    grad = grad.to_sparse()
                p.grad = grad


def broadcast_optimizer_state(optimizer, root_rank, model=None):
    """Makes every rank's optimizer state and options (learning rate, momentum, betas, ...) root's.
    Root first sends what its state holds (the key, shape and dtype of each state tensor, and
    every other value: Python numbers, tuples, flags) as one pickled object; each rank then makes
    its state hold exactly those entries and receives the tensors in place. No optimizer step is
    taken (Horovod takes one on zero gradients to create the state, which moves the parameters
    when there is weight decay and counts a step): a root with a fresh optimizer leaves every
    rank's optimizer fresh. ``model`` names sparse embeddings, whose gradients are sparse."""
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError('cannot broadcast torch.optim.LBFGS state')
    sparse_params = set()
    if model is not None:
        for m in model.modules():
            if isinstance(m, torch.nn.Embedding) and m.sparse:
                sparse_params.update(id(p) for p in m.parameters())
    if len(optimizer.state) == 0:
        _zero_missing_gradients(optimizer, sparse_params)

    # Root's layout: (group, position, key, shape, dtype, on_cpu) per state tensor, and the values.
    layout, values = [], {}
    if rank() == root_rank:
        for index, group in enumerate(optimizer.param_groups):
            for key, value in group.items():
                if key != 'params':
                    values[('option', index, key)] = value
            for position, p in enumerate(group['params']):
                for key, value in optimizer.state.get(p, {}).items():
                    if torch.is_tensor(value):
                        layout.append((index, position, key, tuple(value.shape), value.dtype,
                                       value.device.type == 'cpu'))
                    else:
                        values[('state', index, position, key)] = value
    layout, values = broadcast_object((layout, values), root_rank, name='optimizer_state')

    if rank() != root_rank:
        # This rank's state gets root's entries, and only those.
        keys = {}
        for index, position, key, _, _, _ in layout:
            keys.setdefault((index, position), set()).add(key)
        for where in values:
            if where[0] == 'state':
                keys.setdefault((where[1], where[2]), set()).add(where[3])
        for index, group in enumerate(optimizer.param_groups):
            for position, p in enumerate(group['params']):
                if (index, position) not in keys:
                    optimizer.state.pop(p, None)
                    continue
                state = optimizer.state[p]
                for key in [k for k in state if k not in keys[(index, position)]]:
                    del state[key]
        for index, position, key, shape, dtype, on_cpu in layout:
            p = optimizer.param_groups[index]['params'][position]
            old = optimizer.state[p].get(key)
            if not (torch.is_tensor(old) and tuple(old.shape) == shape and old.dtype == dtype):
                optimizer.state[p][key] = torch.zeros(shape, dtype=dtype, device='cpu' if on_cpu else p.device)
    tensors = []
    for index, position, key, _, _, _ in layout:
        p = optimizer.param_groups[index]['params'][position]
        tensors.append(('optimizer.%d.%d.%s' % (index, position, key), optimizer.state[p][key]))
    broadcast_parameters(tensors, root_rank)
    for where, value in values.items():
        if where[0] == 'option':
            optimizer.param_groups[where[1]][where[2]] = value
        else:
            p = optimizer.param_groups[where[1]]['params'][where[2]]
            optimizer.state[p][where[3]] = value
