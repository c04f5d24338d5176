"""horovod.run from a plain Python process (ctest python_run; not under hvdrun, whose ranks
cannot start mpirun themselves): results by rank, functions that travel by value, the ranks'
environment and output, a failing rank, an elastic relaunch, and the arguments it refuses."""
import io
import os
import signal
import sys
import threading
import time

import pytest

import horovod

LIMIT_S = 60  # per launch; each takes 1 to 5 s here


def _end_our_launches():
    """SIGTERM to this process's children (hvdrun, which then ends mpirun and every rank)."""
    me = str(os.getpid())
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            with open(f'/proc/{pid}/stat') as f:
                ppid = f.read().rsplit(')', 1)[1].split()[1]
        except OSError:
            continue
        if ppid == me:
            os.kill(int(pid), signal.SIGTERM)


def within_limit(launch, *args, **kwargs):
    """``launch(*args, **kwargs)``, failing the test when it has not returned within LIMIT_S."""
    fired = threading.Event()

    def end():
        fired.set()
        _end_our_launches()

    timer = threading.Timer(LIMIT_S, end)
    timer.start()
    try:
        return launch(*args, **kwargs)
    finally:
        timer.cancel()
        if fired.is_set():
            pytest.fail(f'{launch.__name__} did not return within {LIMIT_S} s')


def run(func, **kwargs):
    return within_limit(horovod.run, func, **kwargs)


# Module-level functions such as this one travel by reference: the ranks import this file,
# found through the caller's sys.path that horovod.run ships with the function.
def _rank():
    return int(os.environ['OMPI_COMM_WORLD_RANK'])


def allreduce_rank_plus_one():
    import torch
    import horovod.torch as hvd
    hvd.init()
    total = hvd.allreduce(torch.tensor([hvd.rank() + 1], dtype=torch.float64), op=hvd.Sum)
    return hvd.rank(), hvd.size(), total.item()


@pytest.mark.parametrize('n', [1, 2])
def test_results_in_rank_order(n):
    assert run(allreduce_rank_plus_one, num_proc=n) == [(r, n, n * (n + 1) / 2) for r in range(n)]


def test_closure_args_kwargs_output_and_output_files(tmp_path):
    offset = 100  # captured: the lambda travels by value

    def shout(text):
        print(text, 'from', _rank())
        print('warned', _rank(), file=sys.stderr, flush=True)
        print('no newline', end='')
        if _rank() == 1:  # silenced the way ranks often are: the result still comes back
            os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
            print('never shown', flush=True)

    out = io.StringIO()
    results = run(lambda a, b, c=0: (shout('hello'), offset + a * b + c + _rank())[1],
                  args=(3, 4), kwargs={'c': 5}, num_proc=2, stdout=out, stderr=io.StringIO(),
                  output_filename=str(tmp_path / 'out'))
    assert results == [117, 118]
    lines = sorted(out.getvalue().splitlines())
    assert lines == ['[1,0]<stdout>:hello from 0', '[1,0]<stdout>:no newline',
                     '[1,1]<stdout>:hello from 1', '[1,1]<stdout>:no newline']
    # The files hold what each rank printed, as mpirun lays them out, and no result frame.
    for rank in range(2):
        folder = tmp_path / 'out' / '1' / f'rank.{rank}'
        assert (folder / 'stdout').read_text() == f'hello from {rank}\nno newline'
        assert (folder / 'stderr').read_text() == f'warned {rank}\n'


def test_a_rank_that_raises_fails_the_call_naming_it():
    def fail_on_one():
        import torch
        import horovod.torch as hvd
        hvd.init()
        if hvd.rank() == 1:
            raise ValueError('rank one gives up')
        # Fails once rank 1 has shut down, with a HorovodInternalError that the caller must not
        # name as the cause (its frame may even come first), or waits until mpirun ends it.
        hvd.allreduce(torch.ones(1))
        time.sleep(3 * LIMIT_S)

    start = time.monotonic()
    with pytest.raises(RuntimeError) as caught:
        run(fail_on_one, num_proc=2, stderr=io.StringIO())
    assert time.monotonic() - start < LIMIT_S / 2
    message = str(caught.value)
    assert message.startswith('horovod.run: rank 1 raised ValueError: rank one gives up')
    assert 'mpirun failed with exit code 1\n' in message.splitlines(True)[0]  # what Horovod's users match
    assert 'in fail_on_one' in message  # the rank's traceback
    assert isinstance(caught.value.__cause__, ValueError)
    assert str(caught.value.__cause__) == 'rank one gives up'


def test_env_is_the_ranks_environment(monkeypatch):
    monkeypatch.setenv('HVD_RUN_TEST_CALLER', 'caller')

    def seen():
        return os.environ.get('HVD_RUN_TEST_CALLER'), os.environ.get('HVD_RUN_TEST_GIVEN')

    assert run(seen, num_proc=2) == [('caller', None)] * 2
    env = {k: v for k, v in os.environ.items() if k != 'HVD_RUN_TEST_CALLER'}
    env['HVD_RUN_TEST_GIVEN'] = 'given'
    assert run(seen, num_proc=2, env=env) == [(None, 'given')] * 2


def test_knobs_reach_the_ranks():
    # The extension keywords become hvdrun's flags; False overrides the caller's environment.
    names = ('HOROVOD_FUSION_THRESHOLD', 'HOROVOD_CYCLE_TIME', 'HOROVOD_HIERARCHICAL_ALLREDUCE',
             'HOROVOD_TIMELINE_ALL_RANKS', 'HOROVOD_DYNAMIC_PROCESS_SETS')

    def knobs():
        return [os.environ.get(name) for name in names]

    env = dict(os.environ, HOROVOD_HIERARCHICAL_ALLREDUCE='1', HOROVOD_TIMELINE_ALL_RANKS='1')
    assert run(knobs, num_proc=1, env=env, fusion_threshold_mb=32, cycle_time_ms=3,
               hierarchical_allreduce=False, timeline_all_ranks=False,
               dynamic_process_sets=True) == [[str(32 * 1024 * 1024), '3', '0', '0', '1']]


def test_large_function_and_result():
    # Over the payload's limit in the environment: it travels as a file of this host.
    blob = bytes(range(256)) * 4096

    def double():
        return blob * 2 + bytes([_rank()])

    results = run(double, num_proc=2)
    assert [len(r) for r in results] == [2 * len(blob) + 1] * 2
    assert results[1] == blob + blob + b'\x01'


def test_elastic_relaunch_returns_the_last_launch(tmp_path):
    crashed = tmp_path / 'crashed'

    def once_fails():
        size = int(os.environ['OMPI_COMM_WORLD_SIZE'])
        if _rank() == 1 and not crashed.exists():
            crashed.touch()
            os._exit(5)  # hvdrun leaves this slot out and relaunches on the one left
        return _rank(), size

    with pytest.warns(DeprecationWarning, match='min_np is deprecated'):  # Horovod's old names
        results = run(once_fails, np=2, min_np=1, host_discovery_script='echo localhost:2',
                      cooldown_range=(LIMIT_S, LIMIT_S), stderr=io.StringIO())
    assert crashed.exists()
    assert results == [(0, 1)]  # launch 1's rank 0 returned (0, 2) before its job ended


def test_refused_before_anything_starts(tmp_path):
    started = tmp_path / 'started'

    def touch():
        started.touch()

    with pytest.raises(ValueError, match='use_gloo=True: horovodcpp has no Gloo controller'):
        run(touch, use_gloo=True)
    with pytest.raises(ValueError, match='hierarchical_allgather=True'):
        run(touch, hierarchical_allgather=True)
    with pytest.raises(ValueError, match='min_num_proc need host_discovery_script'):
        run(touch, num_proc=2, min_num_proc=1)
    with pytest.raises(ValueError, match="hvdrun: error: -np '0'"):
        run(touch, num_proc=0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'fusion_threshold'"):
        run(touch, fusion_threshold=64)
    # mpirun's timestamps would cut into the result lines.
    with pytest.raises(ValueError, match="mpi_args '--timestamp-output'"):
        run(touch, mpi_args='--bind-to none --timestamp-output')
    missing, not_executable = tmp_path / 'no-python', tmp_path / 'python'
    not_executable.touch()
    for path in missing, not_executable:
        with pytest.raises(ValueError, match=f"executable '{path}' "):
            run(touch, executable=str(path))
    assert not started.exists()


def test_horovods_launcher_entry_point(tmp_path):
    # Horovod's own tests drive its launcher through _HorovodArgs and launch._run.
    from horovod.runner import _HorovodArgs
    from horovod.runner.launch import _run

    args = _HorovodArgs()
    assert {name: value for name, value in vars(args).items() if value is not None} == {'num_proc': 1}
    args.num_proc, args.use_mpi = 2, True
    args.command = ['sh', '-c', 'echo "rank $OMPI_COMM_WORLD_RANK"']
    out = io.StringIO()
    assert within_limit(_run, args, stdout=out) is None  # a command returns nothing, as in Horovod
    assert sorted(out.getvalue().splitlines()) == ['[1,0]<stdout>:rank 0', '[1,1]<stdout>:rank 1']

    args.command = ['sh', '-c', 'exit 3']
    with pytest.raises(RuntimeError, match='mpirun failed with exit code 3'):
        within_limit(_run, args, stderr=io.StringIO())

    args.command, args.run_func = None, _rank
    assert within_limit(_run, args) == [0, 1]

    args.use_jsrun = True
    with pytest.raises(ValueError, match='use_jsrun=True'):
        within_limit(_run, args)
