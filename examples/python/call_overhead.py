"""What calling from Python costs: a synchronous one-element float32 Sum allreduce through
horovod.torch, beside the same operation through horovodcpp's C++ API in the same process
(hvd::allreduce_async(t, out).wait() in a C++ loop), in place and into a new output, in
alternating rounds.

    hvdrun -np 2 /usr/bin/python3 examples/python/call_overhead.py [--rounds 15] [--iterations 2000]

Each round times `iterations` back-to-back operations per path after a barrier: the wall clock
per operation (slowest rank), and the calling thread's CPU time per operation (this rank's own
work to submit, wait and return, which other processes on a loaded machine do not inflate). The
table shows the median round, and for each Python path the median over rounds of Python minus C++
in the same round.
"""
import argparse
import statistics
import time

import torch

import horovod.torch as hvd


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--rounds', type=int, default=15)
    p.add_argument('--iterations', type=int, default=2000)
    args = p.parse_args()
    hvd.init()
    torch.set_num_threads(1)
    t = torch.ones(1)
    assert hvd.allreduce_(t.clone(), op=hvd.Sum, name='call_overhead.check').item() == hvd.size()

    def python_loop(call):
        def run():
            hvd.barrier()
            cpu, start = time.thread_time(), time.perf_counter()
            for _ in range(args.iterations):
                call()
            return (time.perf_counter() - start) / args.iterations, (time.thread_time() - cpu) / args.iterations
        return run

    cpp = hvd.mpi_ops._C._time_cpp_allreduce
    paths = {
        'C++ API, in place: allreduce_async(t, t).wait()': lambda: cpp(args.iterations, True),
        'Python, in place: hvd.allreduce_(t)': python_loop(
            lambda: hvd.allreduce_(t, op=hvd.Sum, name='call_overhead.py')),
        'C++ API, new output: allreduce_async(t, out).wait()': lambda: cpp(args.iterations, False),
        'Python, new output: hvd.allreduce(t)': python_loop(
            lambda: hvd.allreduce(t, op=hvd.Sum, name='call_overhead.py_out')),
    }
    for run in paths.values():  # warm up: the response cache, the first allocations
        run()
    walls = {name: [] for name in paths}
    cpus = {name: [] for name in paths}
    for r in range(args.rounds):
        names = list(paths) if r % 2 == 0 else list(reversed(list(paths)))
        for name in names:
            wall, cpu = paths[name]()
            slowest = hvd.allreduce(torch.tensor([wall], dtype=torch.float64), op=hvd.Max, name='call_overhead.max')
            walls[name].append(slowest.item() * 1e6)
            cpus[name].append(cpu * 1e6)
    if hvd.rank() == 0:
        print('%d ranks, %d operations per round, %d rounds, torch %s'
              % (hvd.size(), args.iterations, args.rounds, torch.__version__))
        print('| path | wall us/op | Python - C++, wall | calling thread CPU us/op | Python - C++, CPU |')
        print('|:--|--:|--:|--:|--:|')
        names = list(paths)
        targets = []
        for i, name in enumerate(names):
            wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
            if i % 2 == 0:
                print('| %s | %.1f | | %.1f | |' % (name, wall, cpu))
                continue
            base = names[i - 1]
            dwall = statistics.median(a - b for a, b in zip(walls[name], walls[base]))
            dcpu = statistics.median(a - b for a, b in zip(cpus[name], cpus[base]))
            print('| %s | %.1f | %+.1f | %.1f | %+.1f |' % (name, wall, dwall, cpu, dcpu))
            if i == 1:
                what = 'sync 4-byte allreduce at np=%d: Python (hvd.allreduce_) minus the C++ API' % hvd.size()
                targets += [(what + ', wall clock', dwall), (what + ', calling thread CPU', dcpu)]
        print()
        for what, value in targets:  # for scripts/bench.sh
            print('TARGET | %s | %+.1f us | <= 10.0 us | %s' % (what, value, 'PASS' if value <= 10.0 else 'FAIL'))


if __name__ == '__main__':
    main()
