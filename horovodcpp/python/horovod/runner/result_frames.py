"""What each rank of horovod.run sends back: one line on its stdout, which mpirun carries to the
caller from every host, holding the function's pickled return value or exception.

    <RS>horovod.run NONCE LAUNCH RANK SIZE KIND BASE64\\n

RS (0x1e) and the caller's random NONCE (HVD_RUN_NONCE) keep the program's own output from
passing for a frame. LAUNCH names the mpirun job (PMIX_NAMESPACE), so that after an elastic
relaunch the caller keeps the last launch's results. KIND is ``result`` (the cloudpickled value)
or ``error`` (a pickled dict: type, message, traceback, and the cloudpickled exception when it
pickles).
"""
import base64
import pickle
import traceback

NONCE_VAR = 'HVD_RUN_NONCE'
MARKER = b'\x1ehorovod.run '


def _env_int(environ, *names):
    for name in names:
        if name in environ:
            return int(environ[name])
    raise RuntimeError('horovod.run: this process was not started by mpirun (none of %s is set)'
                       % ', '.join(names))


def header(environ):
    """This rank's frame header, ``NONCE LAUNCH RANK SIZE``, from what hvdrun and mpirun set
    before the program started; takes the nonce out of ``environ`` (the function's processes
    need not see it)."""
    launch = environ.get('PMIX_NAMESPACE') or environ.get('OMPI_MCA_ess_base_jobid') or '-'
    rank = _env_int(environ, 'OMPI_COMM_WORLD_RANK', 'PMIX_RANK')
    size = _env_int(environ, 'OMPI_COMM_WORLD_SIZE', 'OMPI_MCA_orte_ess_num_procs')
    return f"{environ.pop(NONCE_VAR)} {launch.replace(' ', '_')} {rank} {size}"


def _line(header, kind, data):
    return MARKER + f"{header} {kind} ".encode('ascii') + base64.b64encode(data) + b'\n'


def result_line(header, value):
    import cloudpickle
    return _line(header, 'result', cloudpickle.dumps(value))


def error_line(header, error):
    import cloudpickle
    report = {'type': type(error).__name__, 'message': str(error),
              'traceback': ''.join(traceback.format_exception(type(error), error, error.__traceback__)),
              'exception': None}
    try:
        report['exception'] = cloudpickle.dumps(error)
    except Exception:  # the type and message still travel
        pass
    return _line(header, 'error', pickle.dumps(report))


class Frame:
    def __init__(self, launch, rank, size, kind, data):
        self.launch, self.rank, self.size, self.kind, self.data = launch, rank, size, kind, data

    def value(self):
        return pickle.loads(self.data)


def split(line, nonce):
    """``(text before the frame, Frame)`` when ``line`` (one rank's output line) ends with a
    frame of this run; ``(line, None)`` otherwise. The text before it is the program's output
    that had no newline yet."""
    at = line.find(MARKER)
    if at < 0:
        return line, None
    fields = line[at + len(MARKER):].split(b' ')
    if len(fields) != 6 or fields[0].decode('ascii', 'replace') != nonce:
        return line, None
    _, launch, rank, size, kind, data = fields
    return line[:at], Frame(launch.decode('ascii'), int(rank), int(size), kind.decode('ascii'),
                            base64.b64decode(data.rstrip(b'\r\n')))
