"""The caller's side of horovod.run: runs hvdrun, shows the ranks' output without the result
frames (and writes it to output_filename's files), and turns the frames into the list of
results, or into the error of the rank that failed. A command (launch._run) only runs, its
output passed on as it comes.
"""
import codecs
import collections
import os
import pickle
import signal
import subprocess
import threading

from horovod.runner import result_frames
from horovod.runner.tagged_output import TaggedOutput


class _Frames:
    """The frames of this run, by launch (elastic jobs launch again), the newest launch last."""

    def __init__(self, nonce, stdout, files):
        self._nonce, self._stdout, self._files = nonce, stdout, files
        self.launches = collections.OrderedDict()

    def on_line(self, rank, line):
        text, frame = result_frames.split(line, self._nonce)
        if frame:  # in the order they came (dicts keep it)
            self.launches.setdefault(frame.launch, {})[frame.rank] = frame
            self.launches.move_to_end(frame.launch)
        if text and self._files and rank is not None:
            self._files.write(rank, 'stdout', text)
        if text:
            # Tagged as mpirun tags it (every mpirun here runs one job, job 1); text that a
            # frame followed on its line gets the newline it lacked.
            tag = '' if rank is None else f'[1,{rank}]<stdout>:'
            end = '\n' if frame and not text.endswith(b'\n') else ''
            self._stdout.write(tag + text.decode('utf-8', 'replace') + end)
            self._stdout.flush()


def _pump_stderr(pipe, stderr, last_lines, on_raw):
    """Passes hvdrun's stderr on as it comes, and to ``on_raw`` (or None), keeping its last
    lines for the error message."""
    for raw in iter(pipe.readline, b''):
        line = raw.decode('utf-8', 'replace')
        stderr.write(line)
        stderr.flush()
        last_lines.append(line.rstrip('\n'))
        if on_raw:
            on_raw(raw)


def _hvdrun(argv, env, on_stdout, stderr, on_stderr=None):
    """Runs hvdrun ``argv`` with ``env`` to its end: ``on_stdout(data)`` gets its stdout as it
    comes, ``stderr`` its stderr (``on_stderr(line)`` too, from another thread). Returns its
    exit code and its last stderr lines."""
    last_lines = collections.deque(maxlen=20)
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    pump = threading.Thread(target=_pump_stderr, args=(proc.stderr, stderr, last_lines, on_stderr),
                            daemon=True)
    pump.start()
    try:
        for data in iter(lambda: os.read(proc.stdout.fileno(), 1 << 16), b''):
            on_stdout(data)
        code = proc.wait()
    except BaseException:
        # Interrupted (Ctrl-C in a notebook): hvdrun forwards the signal and ends every rank.
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise
    finally:
        pump.join(timeout=10)
        proc.stdout.close()
        proc.stderr.close()
    return code, last_lines


def _mpirun_failed(code, last_lines):
    """Horovod's error for a job that failed ("mpirun failed with exit code N"), with hvdrun's
    own summary of it."""
    said = [line for line in last_lines if line.startswith(('hvdrun:', 'horovodrun:'))]
    return RuntimeError(f'horovod.run: mpirun failed with exit code {code}' +
                        (': ' + ' / '.join(said[-3:]) if said else ''))


def _error_of(frames, code):
    """The RuntimeError for the failed rank of ``frames`` (a launch's) that caused the others'
    failures, with its traceback in the message and, when it pickled, its exception as the
    cause. Its first line says "mpirun failed", as Horovod's does.

    A rank that raised shuts down, and its peers' pending collectives then fail with
    HorovodInternalError; their frames may even arrive first (mpirun reads the ranks' outputs in
    any order). So the rank named is the first whose error is another one, else the first."""
    reports = {rank: frame.value() for rank, frame in frames.items() if frame.kind == 'error'}
    failed = sorted(reports, key=lambda rank: reports[rank]['type'] == 'HorovodInternalError')
    report = reports[failed[0]]
    others = f' (rank(s) {", ".join(map(str, failed[1:]))} failed too)' if failed[1:] else ''
    error = RuntimeError(f"horovod.run: rank {failed[0]} raised {report['type']}: {report['message']}"
                         f"{others}; mpirun failed with exit code {code}\n\n"
                         f"rank {failed[0]}'s traceback:\n{report['traceback']}")
    cause = None
    if report['exception'] is not None:
        try:
            cause = pickle.loads(report['exception'])
        except Exception:  # its class may not import here
            pass
    return error, cause


def run_command(argv, env, stdout, stderr):
    """Runs hvdrun ``argv`` (a command) with ``env``, its output passed on as it comes."""
    decoder = codecs.getincrementaldecoder('utf-8')('replace')

    def show(data):
        stdout.write(decoder.decode(data))
        stdout.flush()

    code, last_lines = _hvdrun(argv, env, show, stderr)
    if code != 0:
        raise _mpirun_failed(code, last_lines)


def run_job(argv, env, stdout, stderr, nonce, files=None):
    """Runs hvdrun ``argv`` (task_fn's ranks) with ``env``; returns the return values of its
    last launch, by rank. ``files``: an output_files.RankOutputFiles, or None."""
    frames = _Frames(nonce, stdout, files)
    output = TaggedOutput(frames.on_line)

    def rank_stderr(rank, line):
        if rank is not None:  # not hvdrun's or mpirun's own
            files.write(rank, 'stderr', line)

    errors = TaggedOutput(rank_stderr, stream=b'stderr') if files else None
    on_stderr = errors.feed if files else None
    code, last_lines = _hvdrun(argv, env, output.feed, stderr, on_stderr)
    output.close()
    if files:
        errors.close()
    launch = next(reversed(frames.launches.values()), {})
    if code != 0 and any(frame.kind == 'error' for frame in launch.values()):
        error, cause = _error_of(launch, code)
        raise error from cause
    if code != 0:
        raise _mpirun_failed(code, last_lines)
    size = next(iter(launch.values())).size if launch else 0
    missing = [rank for rank in range(size) if rank not in launch or launch[rank].kind != 'result']
    if not launch or missing:
        raise RuntimeError(
            'horovod.run: the job ended without a result from ' +
            (f"rank(s) {', '.join(map(str, missing))}" if launch else 'any rank') +
            ' (did the function end its process itself, e.g. with sys.exit() or os._exit()?)')
    results = {}
    for rank, frame in launch.items():
        try:
            results[rank] = frame.value()
        except Exception as e:
            raise RuntimeError(f"horovod.run: rank {rank}'s return value does not unpickle here: "
                               f'{type(e).__name__}: {e}') from e
    return [results[rank] for rank in range(size)]
