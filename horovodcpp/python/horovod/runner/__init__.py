"""Horovod's runner API: ``horovod.run`` (also ``horovod.runner.run``) starts a job of
``num_proc`` processes through hvdrun, each calling ``func(*args, **kwargs)``, and returns their
return values by rank. Horovod's tests import helpers from ``horovod.runner.util``. Launch scripts
with horovodcpp's ``hvdrun`` (or mpirun).
"""
import os
import secrets
import subprocess
import sys
import warnings


def run(func, args=(), kwargs=None, num_proc=1, min_num_proc=None, max_num_proc=None, slots=None,
        reset_limit=None, cooldown_range=None, hosts=None, hostfile=None, host_discovery_script=None,
        start_timeout=None, ssh_port=None, ssh_identity_file=None, disable_cache=None,
        output_filename=None, verbose=None, use_gloo=None, use_mpi=None, mpi_args=None,
        network_interface=None, network_interfaces=None, executable=None, np=None, min_np=None,
        max_np=None, *, env=None, stdout=None, stderr=None, **knobs):
    """Runs ``func(*args, **kwargs)`` on ``num_proc`` processes launched by hvdrun and returns
    the list of their return values, index = rank. ``func`` calls ``hvd.init()`` itself.

    Horovod 0.28.1's arguments, in its order and with its meaning: hosts, hostfile and the ssh
    settings, start_timeout, output_filename, verbose, mpi_args, network_interfaces and
    executable (default ``sys.executable``) become hvdrun's flags (docs/launcher.md);
    host_discovery_script with min_num_proc, max_num_proc, slots, reset_limit and cooldown_range
    runs elastically (docs/elastic.md; the results are the last launch's first min_num_proc, as
    in Horovod); disable_cache and use_mpi change nothing (hvdrun caches nothing and always runs
    MPI); use_gloo=True is refused (no Gloo). np, min_np, max_np and network_interface are
    Horovod's deprecated names.

    Beyond Horovod's run(): ``env``, the processes' environment (default: this process's);
    ``stdout``, ``stderr``, where their output goes (default: sys.stdout, sys.stderr); and a
    keyword for each of hvdrun's knob flags (``fusion_threshold_mb=64``, ``cycle_time_ms``,
    ``cache_capacity``, ``timeline_filename``, ``hierarchical_allreduce=True``, ``autotune``, ...:
    hvdrun_command.py lists them).

    An exception in a rank raises RuntimeError here, naming the rank and the exception, with the
    rank's traceback; the rank's exception is its ``__cause__`` when it unpickles here. Arguments
    hvdrun refuses raise ValueError before anything starts. See docs/python.md
    ("horovod.run").
    """
    from horovod.runner import hvdrun_command
    from horovod.runner.func_payload import Payload
    from horovod.runner.hvdrun_location import find_hvdrun
    from horovod.runner.result_frames import NONCE_VAR
    from horovod.runner.run_job import run_job

    unknown = sorted(set(knobs) - hvdrun_command.KNOBS)
    if unknown:
        raise TypeError(f"run() got an unexpected keyword argument '{unknown[0]}'")
    if not callable(func):
        raise TypeError(f'horovod.run: func must be callable, not {type(func).__name__}')
    if network_interface:
        network_interfaces = network_interface.split(',')
        warnings.warn('network_interface is deprecated, use network_interfaces instead',
                      DeprecationWarning)
    if np is not None:
        num_proc = np
        warnings.warn('np is deprecated, use num_proc instead', DeprecationWarning)
    if min_np is not None:
        min_num_proc = min_np
        warnings.warn('min_np is deprecated, use min_num_proc instead', DeprecationWarning)
    if max_np is not None:
        max_num_proc = max_np
        warnings.warn('max_np is deprecated, use max_num_proc instead', DeprecationWarning)

    given = dict(num_proc=num_proc, min_num_proc=min_num_proc, max_num_proc=max_num_proc,
                 slots=slots, reset_limit=reset_limit, cooldown_range=cooldown_range, hosts=hosts,
                 hostfile=hostfile, host_discovery_script=host_discovery_script,
                 start_timeout=start_timeout, ssh_port=ssh_port,
                 ssh_identity_file=ssh_identity_file, output_filename=output_filename,
                 verbose=verbose, use_gloo=use_gloo, mpi_args=mpi_args,
                 network_interfaces=network_interfaces, **knobs)
    given = {name: value for name, value in given.items() if value is not None}
    env = dict(os.environ if env is None else env)
    # mpirun refuses to start inside one of its own jobs ("does not support recursive calls").
    if 'OMPI_COMM_WORLD_RANK' in env or 'PMIX_RANK' in env:
        raise RuntimeError('horovod.run: this process is a rank of an MPI job (OMPI_COMM_WORLD_RANK '
                           'or PMIX_RANK is set), and mpirun cannot start from one: call '
                           'horovod.run from a process that mpirun did not start')
    if 'SLURM_JOB_ID' in env and hosts is None and hostfile is None:
        raise ValueError('horovod.run: inside a Slurm allocation hvdrun launches through srun, '
                         "whose output horovod.run cannot read the ranks' results from: pass "
                         "hosts= (e.g. the allocation's nodes) so that hvdrun runs mpirun")
    flags = hvdrun_command.hvdrun_args(given, env)

    # The ranks import this very package, whatever their path says.
    package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env['PYTHONPATH'] = os.pathsep.join(p for p in (package_parent, env.get('PYTHONPATH')) if p)
    env[NONCE_VAR] = nonce = secrets.token_hex(8)
    hvdrun = find_hvdrun()
    program = ['--', executable or sys.executable, '-m', 'horovod.runner.task_fn']
    payload = Payload(func, args, kwargs or {}, env)
    try:
        # hvdrun checks every value (and runs a discovery script once) without starting anything.
        check = subprocess.run([hvdrun, *flags, '--dry-run', *program], env=env,
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
        if check.returncode != 0:
            said = check.stderr.decode('utf-8', 'replace').strip()
            raise ValueError(f'horovod.run: hvdrun refused the arguments: {said}')
        results = run_job([hvdrun, *flags, *program], env, sys.stdout if stdout is None else stdout,
                          sys.stderr if stderr is None else stderr, nonce)
    finally:
        payload.close()
    if host_discovery_script is not None:
        results = results[:min_num_proc or num_proc]
    return results
