"""``_run(args)``: Horovod 0.28.1's launcher entry point (``horovod.runner.launch._run``), which
horovod.run calls and Horovod's own tests call with a ``_HorovodArgs`` (horovod_args.py). It runs
``args.command``, returning None, or ``args.run_func`` (a function of no arguments), returning
its return values by rank, through hvdrun. This is the one launch path: run() only fills in the
arguments.
"""
import os
import secrets
import shlex
import subprocess
import sys

from horovod.runner import hvdrun_command
from horovod.runner.func_payload import Payload
from horovod.runner.hvdrun_location import find_hvdrun
from horovod.runner.mpi_output_args import refuse_output_format
from horovod.runner.output_files import RankOutputFiles
from horovod.runner.program_check import require_runnable
from horovod.runner.result_frames import NONCE_VAR
from horovod.runner.run_job import run_command, run_job

# The arguments of _HorovodArgs that hvdrun_command maps (or refuses), knobs aside.
_ARGUMENTS = ('num_proc', 'min_num_proc', 'max_num_proc', 'slots', 'reset_limit', 'cooldown_range',
              'hosts', 'hostfile', 'host_discovery_script', 'start_timeout', 'ssh_port',
              'ssh_identity_file', 'output_filename', 'verbose', 'use_gloo', 'use_jsrun',
              'mpi_args')


def _given(args):
    """hvdrun_command's ``given``: the arguments of ``args`` that are set. Horovod keeps the
    network interfaces as a set (``nics``), or, in its older form, a comma-separated ``nic``."""
    given = {name: getattr(args, name, None) for name in (*_ARGUMENTS, *hvdrun_command.KNOBS)}
    nics = getattr(args, 'nics', None) or (args.nic.split(',') if getattr(args, 'nic', None) else None)
    if nics:
        given['network_interfaces'] = sorted(nics) if isinstance(nics, (set, frozenset)) else list(nics)
    return {name: value for name, value in given.items() if value is not None}


def _command_words(command):
    if isinstance(command, str):  # Horovod's is a list of words; a string is split as a shell would
        command = shlex.split(command)
    command = [str(word) for word in command]
    if not command:
        raise ValueError('horovod.run: command is empty')
    return command


def _run(args, env=None, stdout=None, stderr=None):
    """Runs ``args`` (a _HorovodArgs) as Horovod's _run does, over MPI. Beyond Horovod's: ``env``,
    the ranks' environment (default: this process's), and ``stdout``, ``stderr``, where their
    output goes (default: sys.stdout, sys.stderr)."""
    if (args.command is None) == (args.run_func is None):
        raise ValueError('horovod.run: give args.command or args.run_func (one of them)')
    given = _given(args)
    if 'num_proc' not in given:
        raise ValueError('horovod.run: num_proc is not set')
    env = dict(os.environ if env is None else env)
    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr
    # mpirun refuses to start inside one of its own jobs ("does not support recursive calls").
    if 'OMPI_COMM_WORLD_RANK' in env or 'PMIX_RANK' in env:
        raise RuntimeError('horovod.run: this process is a rank of an MPI job (OMPI_COMM_WORLD_RANK '
                           'or PMIX_RANK is set), and mpirun cannot start from one: call '
                           'horovod.run from a process that mpirun did not start')
    if args.command is not None:
        program = _command_words(args.command)
        require_runnable('command', program[0], env)
        output_filename = None  # hvdrun's flag: mpirun writes the files
    else:
        if 'SLURM_JOB_ID' in env and 'hosts' not in given and 'hostfile' not in given:
            raise ValueError('horovod.run: inside a Slurm allocation hvdrun launches through srun, '
                             "whose output horovod.run cannot read the ranks' results from: pass "
                             "hosts= (e.g. the allocation's nodes) so that hvdrun runs mpirun")
        executable = args.executable or sys.executable
        require_runnable('executable', executable, env)
        refuse_output_format(given.get('mpi_args'), env)
        program = [executable, '-m', 'horovod.runner.task_fn']
        # The caller writes these files itself, without the result lines (output_files.py).
        output_filename = given.pop('output_filename', None)
    flags = hvdrun_command.hvdrun_args(given, env)
    hvdrun = find_hvdrun()

    # hvdrun checks every value (and runs a discovery script once) without starting anything.
    check = subprocess.run([hvdrun, *flags, '--dry-run', '--', *program], env=env,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE)
    if check.returncode != 0:
        said = check.stderr.decode('utf-8', 'replace').strip()
        raise ValueError(f'horovod.run: hvdrun refused the arguments: {said}')
    argv = [hvdrun, *flags, '--', *program]
    if args.command is not None:
        return run_command(argv, env, stdout, stderr)
    return _run_func(args, argv, env, stdout, stderr, output_filename)


def _run_func(args, argv, env, stdout, stderr, output_filename):
    # The ranks import this very package, whatever their path says.
    package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env['PYTHONPATH'] = os.pathsep.join(p for p in (package_parent, env.get('PYTHONPATH')) if p)
    env[NONCE_VAR] = nonce = secrets.token_hex(8)
    payload = Payload(args.run_func, (), {}, env)
    # Horovod takes an empty output_filename for none, as here.
    files = RankOutputFiles(output_filename, int(args.num_proc)) if output_filename else None
    try:
        results = run_job(argv, env, stdout, stderr, nonce, files)
    finally:
        payload.close()
        if files:
            files.close()
    if args.host_discovery_script is not None:
        # Horovod returns the first min_num_proc of an elastic job's results.
        results = results[:args.min_num_proc or args.num_proc]
    return results
