"""What calling from Python costs: a synchronous one-element float32 Sum allreduce through
horovod.torch, beside the same operation through horovodcpp's C++ API in the same process
(hvd::allreduce_async(t, t).wait() in a C++ loop), in alternating rounds.

    hvdrun -np 2 /usr/bin/python3 examples/python/call_overhead.py [--rounds 5] [--iterations 2000]

Each round times `iterations` back-to-back operations per path after a barrier and keeps the
slowest rank's time per operation; the table shows the median round and Python minus C++.
"""
import argparse
import statistics
import time

import torch

import horovod.torch as hvd


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--rounds', type=int, default=5)
    p.add_argument('--iterations', type=int, default=2000)
    args = p.parse_args()
    hvd.init()
    torch.set_num_threads(1)
    t = torch.ones(1)
    assert hvd.allreduce_(t.clone(), op=hvd.Sum, name='call_overhead.check').item() == hvd.size()

    def slowest(seconds):
        return hvd.allreduce(torch.tensor([seconds], dtype=torch.float64), op=hvd.Max, name='call_overhead.max').item()

    def python_in_place():
        hvd.barrier()
        start = time.perf_counter()
        for _ in range(args.iterations):
            hvd.allreduce_(t, op=hvd.Sum, name='call_overhead.py')
        return (time.perf_counter() - start) / args.iterations

    def python_out_of_place():
        hvd.barrier()
        start = time.perf_counter()
        for _ in range(args.iterations):
            hvd.allreduce(t, op=hvd.Sum, name='call_overhead.py_out')
        return (time.perf_counter() - start) / args.iterations

    paths = {
        'C++ API: allreduce_async(t, t).wait()': lambda: hvd.mpi_ops._C._time_cpp_allreduce(args.iterations),
        'Python: hvd.allreduce_(t)': python_in_place,
        'Python: hvd.allreduce(t)': python_out_of_place,
    }
    for run in paths.values():  # warm up: the response cache, the first allocations
        run()
    times = {name: [] for name in paths}
    for r in range(args.rounds):
        names = list(paths) if r % 2 == 0 else list(reversed(list(paths)))
        for name in names:
            times[name].append(slowest(paths[name]()) * 1e6)
    if hvd.rank() == 0:
        cpp = statistics.median(times[list(paths)[0]])
        print('%d ranks, %d operations per round, %d rounds, torch %s'
              % (hvd.size(), args.iterations, args.rounds, torch.__version__))
        print('| path | us per operation (median round, slowest rank) | minus C++ (us) |')
        print('|:--|--:|--:|')
        for name in paths:
            median = statistics.median(times[name])
            print('| %s | %.1f | %+.1f |' % (name, median, median - cpp))


if __name__ == '__main__':
    main()
