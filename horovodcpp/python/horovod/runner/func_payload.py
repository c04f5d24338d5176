"""How horovod.run's function reaches the ranks: packed by the caller into the environment that
hvdrun forwards to every rank (on every host), or into a file when it is too large for that.

The function, its arguments and the caller's ``sys.path`` are pickled with cloudpickle (closures,
lambdas and functions of ``__main__`` travel by value). ``sys.path`` goes first, in a plain
pickle of its own, so that the ranks can import the modules the function refers to before
unpickling it.
"""
import base64
import os
import pickle
import shutil
import sys
import tempfile

# Not HOROVOD_*: the runtime warns about every HOROVOD_ variable it does not know.
PARTS_VAR = 'HVD_RUN_PAYLOAD_PARTS'
PART_VAR = 'HVD_RUN_PAYLOAD_{}'
FILE_VAR = 'HVD_RUN_PAYLOAD_FILE'

# Linux takes at most 128 KiB per environment string (MAX_ARG_STRLEN) and about a quarter of the
# stack limit (2 MiB at 8 MiB) for all of them and the command line together, the user's own
# environment included: a few parts of 100,000 characters stay well inside both.
PART_CHARS = 100_000
MAX_ENV_CHARS = 512 * 1024


class Payload:
    """The caller's side: ``env`` gets the payload's variables; ``close()`` removes the file,
    if one was written."""

    def __init__(self, func, args, kwargs, env):
        import cloudpickle
        call = cloudpickle.dumps((func, args, kwargs))
        data = base64.b64encode(pickle.dumps((list(sys.path), call))).decode('ascii')
        self.directory = None
        if len(data) <= MAX_ENV_CHARS:
            parts = [data[i:i + PART_CHARS] for i in range(0, len(data), PART_CHARS)]
            env[PARTS_VAR] = str(len(parts))
            for i, part in enumerate(parts):
                env[PART_VAR.format(i)] = part
        else:
            # mkdtemp's folder is this user's alone (0700): nobody else can swap the file.
            self.directory = tempfile.mkdtemp(prefix='horovod-run-')
            path = os.path.join(self.directory, 'payload')
            with open(path, 'w') as f:
                f.write(data)
            env[FILE_VAR] = path

    def close(self):
        if self.directory:
            shutil.rmtree(self.directory, ignore_errors=True)


def unpack(environ):
    """The rank's side: ``(func, args, kwargs)``, with the caller's ``sys.path`` entries this
    process lacks appended to its own (its own first: the executable may be another Python).
    Takes the payload's variables out of ``environ``: the function's own child processes need
    not carry them."""
    if FILE_VAR in environ:
        path = environ.pop(FILE_VAR)
        try:
            with open(path) as f:
                data = f.read()
        except OSError as e:
            raise RuntimeError(
                f'cannot read the function from {path} ({e.strerror}): horovod.run passes a '
                f'function over {MAX_ENV_CHARS // 1024} KiB (pickled, base64) in a file of the '
                'calling host, which every host must see at the same path (a shared file '
                'system, TMPDIR); make the function smaller (load data inside it)') from None
    else:
        data = ''.join(environ.pop(PART_VAR.format(i)) for i in range(int(environ.pop(PARTS_VAR))))
    path, call = pickle.loads(base64.b64decode(data))
    sys.path.extend(p for p in path if p not in sys.path)
    return pickle.loads(call)
