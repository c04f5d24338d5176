"""``_HorovodArgs``: Horovod 0.28.1's namespace of launcher arguments (``horovod.runner._HorovodArgs``),
which Horovod's own tests fill in and hand to ``horovod.runner.launch._run``. Same attribute names
as Horovod's, all None but ``num_proc`` (1). launch.py says what each means here.
"""


class _HorovodArgs:
    def __init__(self):
        self.num_proc = 1
        # What to run: a command (a list of words), or a function of no arguments whose return
        # values, by rank, _run returns. executable: the ranks' Python for run_func.
        self.command = None
        self.run_func = None
        self.executable = None

        # Hosts and how to reach them.
        self.hosts = None
        self.hostfile = None
        self.host_discovery_script = None
        self.ssh_port = None
        self.ssh_identity_file = None
        self.start_timeout = None
        self.nics = None  # network interface names (Horovod keeps a set)
        self.nic = None   # Horovod's older single-string form, comma-separated

        # Elastic runs (with host_discovery_script).
        self.min_num_proc = None
        self.max_num_proc = None
        self.slots = None
        self.elastic_timeout = None
        self.reset_limit = None
        self.cooldown_range = None

        # Output and MPI.
        self.output_filename = None
        self.verbose = None
        self.mpi_args = None
        self.tcp_flag = None
        self.binding_args = None

        # Controllers: MPI is the only one here.
        self.use_gloo = None
        self.use_mpi = None
        self.use_jsrun = None

        # Horovod's command-line front end acts on these before _run; _run ignores them, as
        # Horovod's does.
        self.check_build = None
        self.config_file = None
        self.disable_cache = None  # hvdrun caches nothing

        # Knobs, the runtime's settings (hvdrun_command.py maps or refuses each). Horovod sets
        # cycle_time_ms and cache_capacity to (None,), by a trailing comma; None here.
        self.fusion_threshold_mb = None
        self.cycle_time_ms = None
        self.cache_capacity = None
        self.hierarchical_allreduce = None
        self.hierarchical_allgather = None
        self.torus_allreduce = None
        self.autotune = None
        self.autotune_log_file = None
        self.autotune_warmup_samples = None
        self.autotune_steps_per_sample = None
        self.autotune_bayes_opt_max_samples = None
        self.autotune_gaussian_process_noise = None
        self.timeline_filename = None
        self.timeline_mark_cycles = None
        self.no_stall_check = None
        self.stall_check_warning_time_seconds = None
        self.stall_check_shutdown_time_seconds = None
        self.mpi_threads_disable = None
        self.num_nccl_streams = None
        self.thread_affinity = None
        self.gloo_timeout_seconds = None
        self.log_level = None
        self.log_with_timestamp = None
        self.prefix_output_with_timestamp = None
