"""What both DistributedOptimizers (averaging: optimizer.py; Adasum: adasum_optimizer.py) share:
the parameters' names, a hook on each trainable parameter's gradient accumulator that holds the
optimizer weakly, the process-wide claim on each gradient's collective name, zero_grad()'s refusal
while reductions are pending, and set_backward_passes_per_step()."""
import threading
import weakref


def checked_named_parameters(param_groups, named_parameters):
    """named_parameters as a list of (name, parameter), checked as Horovod checks them; without
    it, names from the parameters' positions (the same on every rank)."""
    if named_parameters is not None:
        named_parameters = list(named_parameters)
    else:
        named_parameters = [('allreduce.noname.%d.%d' % (i, j), v)
                            for i, group in enumerate(param_groups)
                            for j, v in enumerate(group['params'])]
    if any(not isinstance(p, tuple) for p in named_parameters):
        raise ValueError('named_parameters should be a sequence of tuples (name, parameter), usually '
                         'produced by model.named_parameters().')
    names = [k for k, _ in named_parameters]
    dups = sorted({k for k in names if names.count(k) > 1})
    if dups:
        raise ValueError('Parameter names in named_parameters must be unique. Found duplicates: %s'
                         % ', '.join(dups))
    all_ids = {id(v) for group in param_groups for v in group['params']}
    unnamed = all_ids - {id(v) for _, v in named_parameters}
    if unnamed:
        raise ValueError('named_parameters was specified, but one or more model parameters were not named. '
                         'Python object ids: %s' % ', '.join(str(i) for i in sorted(unnamed)))
    return named_parameters


class HeldNames:
    """The gradient names DistributedOptimizers have taken, process-wide: (process set id,
    parameter name) -> the taker (weakly).

    Note [A gradient name is held from its hook to synchronize()]: two optimizers whose
    parameters share names (two models' "weight"s) would otherwise both submit allreduces of one
    name in one step. The runtime refuses a name already in flight, but whether the first one is
    still in flight when the second comes depends on timing, which differs between ranks: one
    rank refuses, another reduces both (each with the other's gradient, or later, with a stale
    one) and the job hangs or trains on wrong gradients. Refused here instead, in program order,
    so every rank refuses the same gradient at the same point with the same error.
    """

    def __init__(self):
        self._lock = threading.Lock()  # hooks of CUDA gradients run on autograd's device threads
        self._held = {}

    def claim(self, owner, keys):
        """Takes every one of ``keys`` for ``owner`` (a weakref to the optimizer), or none of them:
        raises ValueError naming the first one another live optimizer holds."""
        with self._lock:
            for set_id, name in keys:
                holder = self._held.get((set_id, name))
                if holder is not None and holder is not owner and holder() is not None:
                    raise ValueError(
                        "DistributedOptimizer: the gradient of parameter '%s'%s is held by another "
                        "DistributedOptimizer, which took it in a backward pass and has not synchronized it yet "
                        "(step() or synchronize()); reducing both at once would mix the two gradients. Give each "
                        "model's parameters their own names (named_parameters=[('model2.' + n, p) for n, p in "
                        "model.named_parameters()]), step the first optimizer before the second one's backward, or, "
                        "if the second replaces the first, drop every reference to the first (a scheduler's too)"
                        % (name, '' if set_id == 0 else ' in process set %d' % set_id))
            for key in keys:
                self._held[key] = owner

    def release(self, owner, keys):
        with self._lock:
            for key in keys:
                if self._held.get(key) is owner:
                    del self._held[key]


held_names = HeldNames()


def _hook(owner, p):
    def hook(*unused):
        optimizer = owner()
        if optimizer is not None:
            optimizer._gradient_ready(p)
    return hook


def _layout(p):
    return p.shape, p.dtype, p.device


class GradientHooks:
    """Methods the wrapper classes take (wrapper_methods); the class using them has
    _parameter_names, process_set, _handles, _allreduce_delay and _gradient_ready(p)."""

    def _setup_gradient_hooks(self):
        self._self_ref = weakref.ref(self)
        self._held_keys = set()   # see Note [A gradient name is held from its hook to synchronize()]
        # parameter -> (its gradient accumulator, our hook's handle, its layout then): autograd
        # keeps an accumulator only while someone holds it
        self._grad_accs = {}

    def _hook_gradients(self, params):
        # Note [A dropped DistributedOptimizer stops reducing]: the optimizer holds each
        # parameter's gradient accumulator (autograd keeps only one while someone does), so a
        # later optimizer over the same parameters hooks the same accumulators. A hook holding its
        # optimizer strongly would keep every DistributedOptimizer ever made over a model alive
        # and reducing, unreachable as it is: after the model's optimizer was wrapped again (new
        # param groups, a new epoch), every gradient went out twice per step, and the old
        # optimizer, never stepped again, failed the next backward ("Gradients were computed
        # more than backward_passes_per_step times", or its name held). Held weakly, an optimizer
        # the program no longer references is freed at once and its hooks do nothing.
        for p in params:
            grad_acc = p.expand_as(p).grad_fn.next_functions[0][0]
            handle = grad_acc.register_hook(_hook(self._self_ref, p))
            self._grad_accs[p] = (grad_acc, handle, _layout(p))

    def _trainable_now(self, done=()):
        """The parameters that take part in this step, less those in ``done``: those that require
        grad now, in the optimizer's order (the same on every rank); hooks the ones unfrozen since
        the last call (never in ``done``: no hook of theirs ran).

        Note [Parameters frozen or unfrozen after wrapping]: fine-tuning unfreezes a backbone after
        some epochs, or freezes a layer mid-training, on a wrapped optimizer. Horovod fixes the
        reduced set at construction: a parameter unfrozen later stepped on each rank's own
        gradient (the ranks' models drifted apart, silently), and one frozen later got a zero
        gradient every step (weight decay and momentum moved it, where one process skips a
        parameter without a gradient). Read at every step instead: an unfrozen parameter's
        gradient goes out with the rest in synchronize() (during backward from its next pass
        on), a frozen one takes no part. The ranks must agree, as on every other parameter; the
        LibTorch front end checks that (GradientReducer's round), here a rank that differs leaves
        its peers waiting for the gradient, which the stall warning names."""
        trainable = [p for group in self.param_groups for p in group['params'] if p.requires_grad and p not in done]
        unhooked = [p for p in trainable if p not in self._grad_accs]
        if unhooked:
            unnamed = [p for p in unhooked if p not in self._parameter_names]
            if unnamed:
                raise ValueError('DistributedOptimizer: %d trainable parameter(s), first one of shape %s, are not '
                                 'among the named_parameters given at construction (a param group added after '
                                 'wrapping?); name every parameter of the model when wrapping, frozen ones too'
                                 % (len(unnamed), tuple(unnamed[0].shape)))
            self._hook_gradients(unhooked)
        return trainable

    def _renew_replaced_hooks(self, params=None):
        """Note [A parameter's data replaced] (horovodcpp/torch/gradient_reducer.cc, the same for
        the LibTorch front end): ``p.data = ...`` or ``module.to()`` with another shape, dtype or
        device after the optimizer was built. Autograd then builds a new accumulator for another
        dtype or device, without our hook (every reduction waited for synchronize()), and for
        another shape keeps the one we hold and refuses the new gradient ("Function
        AddmmBackward0 returned an invalid gradient"). The hooks of such parameters move to fresh
        accumulators at zero_grad(), and at step() for ``params``, those whose hook did not run
        in this step (after a model.zero_grad(), the optimizer's never ran): the check costs
        about 0.25 us per parameter in Python, too much for every parameter at every step."""
        candidates = self._grad_accs if params is None else [p for p in params if p in self._grad_accs]
        replaced = [p for p in candidates if _layout(p) != self._grad_accs[p][2]]
        for p in replaced:
            self._grad_accs.pop(p)[1].remove()  # and the old accumulator with it
        if replaced:
            self._hook_gradients(replaced)

    def _hold(self, params):
        """Takes the names of ``params``' gradients for this step, all or none (ValueError when
        another optimizer holds one): see Note [A gradient name is held from its hook to
        synchronize()]."""
        set_id = self.process_set.process_set_id
        keys = [(set_id, self._parameter_names[p]) for p in params]
        keys = [k for k in keys if k not in self._held_keys]
        if keys:
            held_names.claim(self._self_ref, keys)
            self._held_keys.update(keys)

    def _release_held(self):
        held_names.release(self._self_ref, self._held_keys)
        self._held_keys.clear()

    def zero_grad(self, *args, **kwargs):
        if self._handles:
            raise AssertionError('optimizer.zero_grad() was called after loss.backward() but before '
                                 'optimizer.step() or optimizer.synchronize(). This is prohibited as it can cause '
                                 'a race condition.')
        self._renew_replaced_hooks()
        return super(type(self), self).zero_grad(*args, **kwargs)

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = passes


def wrapper_methods(*classes):
    """The methods a wrapper class made on the fly takes from ``classes`` (later ones win)."""
    methods = {}
    for cls in classes:
        methods.update({name: value for name, value in vars(cls).items() if not name.startswith('__')})
    return methods
