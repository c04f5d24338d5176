"""The elastic state base (Horovod's horovod.common.elastic) on horovodcpp's commit store.

horovodcpp does not repair a job in place (docs/elastic.md): when hosts are lost or added,
hvdrun relaunches the job and every rank resumes from the newest commit, which each host keeps a
copy of. As in Horovod, a state keeps its last snapshot in memory: ``save()`` takes it,
``restore()`` goes back to it (both local), and ``commit()`` takes it and also writes it to this
host's store (raising HostsUpdatedInterrupt on every rank when hvdrun announced a change of
hosts); ``sync()`` makes every rank's state rank 0's. ``run`` resumes from the newest commit any
rank holds (rank 0's state when there is none), calls the training function, and turns
HostsUpdatedInterrupt into the exit code hvdrun relaunches on.
"""
import functools
import sys

from horovod.common.exceptions import HostsUpdatedInterrupt


class State:
    """A training state that survives a relaunch. Subclasses say how it becomes bytes and back:
    ``_save_bytes()`` and ``_load_bytes(data)``, and what a load leaves to redo on a rank that
    kept its own state (``_relayout()``); they call ``save()`` once built. commit(), sync() and
    the resume in ``run`` are collectives: call them on every rank, in the same order."""

    def __init__(self, backend):
        object.__setattr__(self, '_core', backend.ElasticState(self))
        object.__setattr__(self, '_reset_callbacks', [])
        object.__setattr__(self, '_snapshot', None)
        object.__setattr__(self, '_commit_bytes', None)

    def register_reset_callbacks(self, callbacks):
        """Callbacks run after a resume at another world size than the commit was taken at
        (e.g. to rescale the learning rate)."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        for callback in self._reset_callbacks:
            callback()

    def save(self):
        """Keeps the state in memory, for restore() (local: no other rank takes part)."""
        object.__setattr__(self, '_snapshot', self._save_bytes())

    def restore(self):
        """Goes back to the last save(), commit() or sync() of this state, undoing what changed
        since (local, as in Horovod: the relaunch's resume is run's)."""
        if self._snapshot is not None:
            self._load_bytes(self._snapshot)

    def commit(self):
        """save(), and writes that snapshot to this host's commit store (the unit of loss: work
        since the last commit is redone after a failure); raises HostsUpdatedInterrupt on every
        rank, after writing, when hvdrun announced a change of hosts."""
        self.save()
        object.__setattr__(self, '_commit_bytes', self._snapshot)
        try:
            self._core.commit()
        finally:
            object.__setattr__(self, '_commit_bytes', None)

    def sync(self):
        """Makes every rank's state rank 0's, and keeps it as the snapshot restore() returns to."""
        self._core.sync()
        self._relayout()
        self.save()

    def _resume(self):
        """The newest commit any rank holds (rank 0's state when none), as a relaunched job
        starts; the reset callbacks run when that commit was taken at another world size."""
        self._core.restore()
        self._relayout()
        self.save()
        taken_at = self._core.restored_world_size
        if taken_at and taken_at != self._size():
            self.on_reset()

    def _core_bytes(self):
        # What the commit store and the broadcasts carry: a commit writes its own snapshot
        # rather than serializing the state a second time.
        return self._commit_bytes if self._commit_bytes is not None else self._save_bytes()

    @property
    def commit_id(self):
        """The newest commit taken or resumed from (0: none yet), the same on every rank."""
        return self._core.commit_id

    def _size(self):
        raise NotImplementedError

    def _save_bytes(self):
        raise NotImplementedError

    def _load_bytes(self, data):
        raise NotImplementedError

    def _relayout(self):
        pass


def run_fn(func, init, shutdown, is_initialized, exit_code):
    """The body of the framework's ``run`` decorator."""
    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        if not is_initialized():
            init()
        state._resume()
        try:
            result = func(state, *args, **kwargs)
        except HostsUpdatedInterrupt:
            # The commit is on every host; hvdrun relaunches the job at the new size.
            sys.stdout.flush()
            sys.stderr.flush()
            shutdown()
            sys.exit(exit_code)
        state._core.finish()
        return result
    return wrapper
