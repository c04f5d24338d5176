"""The elastic state base (Horovod's horovod.common.elastic) on horovodcpp's commit store.

horovodcpp does not repair a job in place (docs/elastic.md): when hosts are lost or added,
hvdrun relaunches the job and every rank resumes from the newest commit, which each host keeps a
copy of. So ``commit()`` writes the state to this host's store (and raises
HostsUpdatedInterrupt on every rank when hvdrun announced a change of hosts), ``restore()``
loads the newest commit any rank holds (or rank 0's state when there is none), and ``sync()``
makes every rank's state rank 0's. ``run`` does the restore, calls the training function, and
turns HostsUpdatedInterrupt into the exit code hvdrun relaunches on.
"""
import functools
import sys

from horovod.common.exceptions import HostsUpdatedInterrupt


class State:
    """A training state that survives a relaunch. Subclasses say how it becomes bytes and back:
    ``_save_bytes()`` and ``_load_bytes(data)``. Every method but register_reset_callbacks is a
    collective: call it on every rank, in the same order."""

    def __init__(self, backend):
        object.__setattr__(self, '_core', backend.ElasticState(self))
        object.__setattr__(self, '_reset_callbacks', [])

    def register_reset_callbacks(self, callbacks):
        """Callbacks run after a restore at another world size than the commit was taken at
        (e.g. to rescale the learning rate)."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        """Writes the state to this host's commit store (the unit of loss: work since the last
        commit is redone after a failure); raises HostsUpdatedInterrupt on every rank, after
        writing, when hvdrun announced a change of hosts."""
        self._core.commit()

    def save(self):
        """The same as commit(): a horovodcpp snapshot is a commit."""
        self.commit()

    def restore(self):
        """Loads the newest commit any rank holds (rank 0's current state when none), runs the
        reset callbacks when it was taken at another world size."""
        self._core.restore()
        taken_at = self._core.restored_world_size
        if taken_at and taken_at != self._size():
            self.on_reset()

    def sync(self):
        """Makes every rank's state rank 0's."""
        self._core.sync()

    @property
    def commit_id(self):
        """The newest commit taken or restored (0: none yet), the same on every rank."""
        return self._core.commit_id

    def _size(self):
        raise NotImplementedError

    def _save_bytes(self):
        raise NotImplementedError

    def _load_bytes(self, data):
        raise NotImplementedError


def run_fn(func, init, shutdown, is_initialized, exit_code):
    """The body of the framework's ``run`` decorator."""
    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        if not is_initialized():
            init()
        state.restore()
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
