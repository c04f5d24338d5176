"""Horovod's runner API: ``horovod.run`` (also ``horovod.runner.run``) starts a job of
``num_proc`` processes through hvdrun, each calling ``func(*args, **kwargs)``, and returns their
return values by rank. Horovod's tests import helpers from ``horovod.runner.util`` and drive
its launcher through ``_HorovodArgs`` and ``horovod.runner.launch._run`` (launch.py), which run()
calls too. Launch scripts with horovodcpp's ``hvdrun`` (or mpirun).
"""
import functools
import warnings

from horovod.runner.horovod_args import _HorovodArgs


def run(func, args=(), kwargs=None, num_proc=1, min_num_proc=None, max_num_proc=None, slots=None,
        reset_limit=None, cooldown_range=None, hosts=None, hostfile=None, host_discovery_script=None,
        start_timeout=None, ssh_port=None, ssh_identity_file=None, disable_cache=None,
        output_filename=None, verbose=None, use_gloo=None, use_mpi=None, mpi_args=None,
        network_interface=None, network_interfaces=None, executable=None, np=None, min_np=None,
        max_np=None, *, env=None, stdout=None, stderr=None, **knobs):
    """Runs ``func(*args, **kwargs)`` on ``num_proc`` processes launched by hvdrun and returns
    the list of their return values, index = rank. ``func`` calls ``hvd.init()`` itself.

    Horovod 0.28.1's arguments, in its order and with its meaning: hosts, hostfile and the ssh
    settings, start_timeout, verbose, mpi_args, network_interfaces and executable (default
    ``sys.executable``) become hvdrun's flags (docs/launcher.md); output_filename gets each rank's
    output in mpirun's layout, written by the caller (output_files.py);
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
    hvdrun refuses, an executable that cannot run and mpi_args that change mpirun's output format
    (mpi_output_args.py) raise ValueError before anything starts. See docs/python.md
    ("horovod.run").
    """
    from horovod.runner import hvdrun_command
    from horovod.runner.launch import _run

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

    hargs = _HorovodArgs()
    hargs.num_proc, hargs.min_num_proc, hargs.max_num_proc = num_proc, min_num_proc, max_num_proc
    hargs.slots, hargs.reset_limit, hargs.cooldown_range = slots, reset_limit, cooldown_range
    hargs.hosts, hargs.hostfile, hargs.host_discovery_script = hosts, hostfile, host_discovery_script
    hargs.start_timeout, hargs.ssh_port = start_timeout, ssh_port
    hargs.ssh_identity_file, hargs.disable_cache = ssh_identity_file, disable_cache
    hargs.output_filename, hargs.verbose = output_filename, verbose
    hargs.use_gloo, hargs.use_mpi, hargs.mpi_args = use_gloo, use_mpi, mpi_args
    hargs.nics = network_interfaces  # a list, in the caller's order (Horovod makes it a set)
    hargs.executable = executable
    hargs.run_func = functools.partial(func, *args, **(kwargs or {}))
    for name, value in knobs.items():
        setattr(hargs, name, value)
    return _run(hargs, env=env, stdout=stdout, stderr=stderr)
