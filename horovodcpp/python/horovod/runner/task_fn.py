"""What each rank of horovod.run runs (``python -m horovod.runner.task_fn``): the caller's
function, then its return value, or the exception it raised, as one frame on stdout
(result_frames.py).

A rank whose function raised exits with code 1 (after the usual atexit shutdown, so that the
function's files are flushed), on which mpirun ends the other ranks.
"""
import os
import sys

from horovod.runner import func_payload, result_frames


def _write(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def main():
    # The frame goes where stdout pointed at start, even if the function sends fd 1 elsewhere
    # (ranks other than 0 often silence themselves that way).
    out = os.dup(1)
    header = result_frames.header(os.environ)
    failed = False
    try:
        func, args, kwargs = func_payload.unpack(os.environ)
        value = func(*args, **kwargs)
        try:
            line = result_frames.result_line(header, value)
        except Exception as e:
            raise RuntimeError(f'its return value does not pickle: {type(e).__name__}: {e}') from e
    except Exception as e:  # SystemExit passes: hvd.elastic.run's exit asks hvdrun to relaunch
        failed = True
        line = result_frames.error_line(header, e)
    sys.stdout.flush()
    sys.stderr.flush()
    _write(out, line)
    if failed:
        sys.exit(1)


if __name__ == '__main__':
    main()
