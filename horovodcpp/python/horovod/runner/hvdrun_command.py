"""horovod.run's keyword arguments as hvdrun's command line (docs/launcher.md): Horovod 0.28.1's
own, and, as extensions, a keyword for each of hvdrun's knob flags, named as horovodrun names
them. An argument hvdrun cannot honour is refused here with a ValueError naming it, before
anything starts; the values themselves are checked by hvdrun (``--dry-run``, runner/__init__.py).
"""

# Horovod's run() arguments that take one value, and their hvdrun flags.
_VALUE_FLAGS = {
    'hosts': '-H', 'hostfile': '--hostfile', 'host_discovery_script': '--host-discovery-script',
    'min_num_proc': '--min-np', 'max_num_proc': '--max-np', 'slots': '--slots-per-host',
    'reset_limit': '--reset-limit', 'start_timeout': '--start-timeout', 'ssh_port': '-p',
    'ssh_identity_file': '-i', 'output_filename': '--output-filename', 'mpi_args': '--mpi-args',
}

# Extensions: the knobs. A value knob's flag takes the value as given.
KNOB_VALUE_FLAGS = {
    'fusion_threshold_mb': '--fusion-threshold-mb', 'cycle_time_ms': '--cycle-time-ms',
    'cache_capacity': '--cache-capacity', 'timeline_filename': '--timeline-filename',
    'stall_check_warning_time_seconds': '--stall-check-warning-time-seconds',
    'stall_check_shutdown_time_seconds': '--stall-check-shutdown-time-seconds',
    'liveness_timeout_seconds': '--liveness-timeout-seconds',
    'autotune_log_file': '--autotune-log-file', 'autotune_warmup_samples': '--autotune-warmup-samples',
    'autotune_steps_per_sample': '--autotune-steps-per-sample',
    'autotune_bayes_opt_max_samples': '--autotune-bayes-opt-max-samples',
    'autotune_gaussian_process_noise': '--autotune-gaussian-process-noise',
    'log_level': '--log-level', 'elastic_timeout': '--elastic-timeout', 'binding_args': '--binding-args',
}

# A switch's (flag for True, what False needs): the opposite flag, a variable set to 0 for the
# ranks (so that False also overrides the caller's environment), or nothing.
KNOB_SWITCHES = {
    'hierarchical_allreduce': ('--hierarchical-allreduce', '--no-hierarchical-allreduce'),
    'autotune': ('--autotune', '--no-autotune'),
    'timeline_mark_cycles': ('--timeline-mark-cycles', '--no-timeline-mark-cycles'),
    'timeline_all_ranks': ('--timeline-all-ranks', 'HOROVOD_TIMELINE_ALL_RANKS'),
    'no_stall_check': ('--no-stall-check', '--stall-check'),
    'log_with_timestamp': ('--log-with-timestamp', '--log-hide-timestamp'),
    'dynamic_process_sets': ('--dynamic-process-sets', 'HOROVOD_DYNAMIC_PROCESS_SETS'),
    'tcp_flag': ('--tcp', None),
}

# horovodrun settings that horovodcpp cannot honour when set (False, 0 or None are fine).
KNOB_REFUSED = {
    'hierarchical_allgather': "horovodcpp's allgather has no hierarchical form",
    'torus_allreduce': 'horovodcpp has no torus allreduce (hierarchical_allreduce is its two-level one)',
    'num_nccl_streams': 'horovodcpp runs its NCCL collectives on one stream per device',
    'thread_affinity': 'horovodcpp places its background thread itself',
    'gloo_timeout_seconds': 'horovodcpp has no Gloo controller',
    'mpi_threads_disable': "horovodcpp's background thread needs MPI_THREAD_MULTIPLE",
    'prefix_output_with_timestamp': "mpirun's timestamps ahead of its rank tags would keep "
                                    "horovod.run from reading the ranks' results",
}

KNOBS = set(KNOB_VALUE_FLAGS) | set(KNOB_SWITCHES) | set(KNOB_REFUSED)

_ELASTIC = ('min_num_proc', 'max_num_proc', 'slots', 'reset_limit', 'cooldown_range', 'elastic_timeout')


def hvdrun_args(given, env):
    """hvdrun's flags for ``given`` (run()'s arguments that are not None, knobs included; the
    process count as ``num_proc``); may set variables in ``env``, the ranks' environment."""
    if given.get('use_gloo'):
        raise ValueError('horovod.run: use_gloo=True: horovodcpp has no Gloo controller; its jobs '
                         'run over MPI (leave use_gloo unset, or set use_mpi=True)')
    if given.get('use_jsrun'):
        raise ValueError('horovod.run: use_jsrun=True: horovodcpp launches through mpirun (or srun '
                         'in a Slurm allocation), not jsrun')
    if given.get('hosts') is not None and given.get('hostfile') is not None:
        raise ValueError('horovod.run: give hosts or hostfile, not both')
    elastic = [name for name in _ELASTIC if name in given]
    if elastic and 'host_discovery_script' not in given:
        raise ValueError(
            f"horovod.run: {', '.join(elastic)} need host_discovery_script: hvdrun's elastic mode "
            "takes its hosts from a discovery script (Horovod's elastic mode over fixed hosts is "
            "not supported; a script that prints them does it, e.g. "
            "host_discovery_script='echo host1:2; echo host2:2')")
    for name, reason in KNOB_REFUSED.items():
        if given.get(name):
            raise ValueError(f'horovod.run: {name}={given[name]!r}: {reason}')
    argv = ['-np', str(given['num_proc'])]
    for name, flag in list(_VALUE_FLAGS.items()) + list(KNOB_VALUE_FLAGS.items()):
        if name in given:
            argv += [flag, str(given[name])]
    if 'cooldown_range' in given:
        low, high = given['cooldown_range']
        argv += ['--blacklist-cooldown-range', str(low), str(high)]
    if given.get('network_interfaces'):
        nics = given['network_interfaces']
        argv += ['--network-interfaces', nics if isinstance(nics, str) else ','.join(nics)]
    if given.get('verbose'):
        argv.append('--verbose')
    for name, (on, off) in KNOB_SWITCHES.items():
        if name not in given:
            continue
        if given[name]:
            argv.append(on)
        elif off and off.startswith('--'):
            argv.append(off)
        elif off:
            env[off] = '0'
    return argv
