"""Process sets (Horovod's horovod.common.process_sets): groups of ranks that run collectives
among themselves. A set is made from global ranks and registered with hvd.init(process_sets=...)
or hvd.add_process_set() (which needs HOROVOD_DYNAMIC_PROCESS_SETS=1); from then on it has a
process_set_id and is passed to collectives as ``process_set=``. Sets compare by identity, as in
Horovod."""
import warnings

_backend = None  # the extension (horovod._horovodcpp), set by the framework module that loads it


class ProcessSet:
    """A set of global ranks; ``process_set_id`` is None until it is registered."""
    process_set_id = None
    ranks = None
    mpi_comm = None

    def __init__(self, ranks_or_comm):
        try:
            ranks = sorted(ranks_or_comm)
        except TypeError:
            raise ValueError("ProcessSet takes a list of global ranks (horovodcpp does not take mpi4py "
                             "communicators), got %r" % (ranks_or_comm,)) from None
        if any(not isinstance(r, int) for r in ranks):
            raise ValueError("ProcessSet takes a list of integer ranks, got %r" % (ranks,))
        self.ranks = ranks

    def _invalidate(self):
        self.process_set_id = None

    def size(self):
        """The number of ranks in the set, or None while it is not registered."""
        if self.process_set_id is None:
            return None
        return len(self.ranks)

    def rank(self):
        """This process's index among the set's ranks, or None while it is not registered.
        Collectives still take global ranks (e.g. broadcast's root_rank)."""
        if self.process_set_id is None:
            return None
        me = _backend.rank()
        if me not in self.ranks:
            raise ValueError("rank %d is not in %s" % (me, self))
        return self.ranks.index(me)

    def included(self):
        """Whether this process is in the set (None before its ranks are known)."""
        if self.ranks is None:
            return None
        return _backend.rank() in self.ranks

    def __str__(self):
        return "ProcessSet(process_set_id=%s, ranks=%s)" % (self.process_set_id, self.ranks)

    __repr__ = __str__


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0


def _setup(backend):
    global _backend
    _backend = backend


def _init_process_sets(process_sets, ids):
    """After hvd.init(process_sets=...): the sets get the ids the runtime gave them."""
    for ps, ps_id in zip(process_sets, ids):
        ps.process_set_id = ps_id
    global_process_set.ranks = list(range(_backend.size()))


def _check_process_sets(process_sets):
    """The ranks hvd.init() registers, checked on this rank before anything is sent."""
    if process_sets is None:
        return []
    if isinstance(process_sets, str):
        if process_sets.lower() != "dynamic":
            raise ValueError("process_sets must be a list of ProcessSet objects or 'dynamic', got %r"
                             % (process_sets,))
        return []
    process_sets = list(process_sets)
    for i, ps in enumerate(process_sets):
        if not isinstance(ps, ProcessSet):
            raise ValueError("process_sets entry %d is not a ProcessSet: %r" % (i, ps))
        if ps is global_process_set:
            raise ValueError("process_sets entry %d is hvd.global_process_set, which is always there" % i)
        if ps.process_set_id is not None:
            raise ValueError("process_sets entry %d is already registered: %s" % (i, ps))
    return process_sets


def add_process_set(process_set):
    """Registers a set (a ProcessSet or a list of global ranks) on every rank and returns it with
    its process_set_id. A collective over all ranks, called in the same order everywhere; needs
    HOROVOD_DYNAMIC_PROCESS_SETS=1. A set with the same ranks as a registered one is a ValueError."""
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    if process_set.process_set_id is not None:
        raise ValueError("%s is already registered" % process_set)
    process_set.process_set_id = _backend.add_process_set(process_set.ranks)
    return process_set


def remove_process_set(process_set):
    """Removes a registered set on every rank (a collective, like add_process_set) and returns
    whether it was removed. The global set cannot be removed; neither can a set with operations
    in flight (a warning says why)."""
    process_set_id = process_set.process_set_id
    if process_set_id is None or process_set_id == 0:
        return False
    try:
        _backend.remove_process_set(process_set_id)
    except ValueError as e:
        warnings.warn("hvd.remove_process_set(%s) failed: %s" % (process_set, e))
        return False
    process_set._invalidate()
    return True
