"""Horovod's synthetic benchmark for horovod.torch on horovodcpp, beside PyTorch's own
DistributedDataParallel (Gloo, CPU) in the same launch: images per second of a torchvision model
training on one fixed random batch, with SGD and momentum.

    hvdrun -np 2 /usr/bin/python3 examples/python/synthetic_benchmark.py --model resnet18

Variants, each with its own model copy (same initial weights): `horovodcpp`
(hvd.DistributedOptimizer with its defaults: where the ranks fill the host's cores, as two ranks of
one thread on two cores do, host gradients go as one batch when backward ends),
`horovodcpp-overlap` (the same, each gradient submitted as backward produces it, Horovod's way),
`ddp` (torch.nn.parallel.DistributedDataParallel over a Gloo process group, which overlaps its
buckets with backward), and `none` (no communication: the upper bound). Iterations of the variants
take turns after a barrier, in a fresh order each iteration (a shuffle seeded by the iteration
number, the same on every rank). Img/sec adds the ranks (each iteration timed on the slowest
rank); "paired median" divides each iteration of horovodcpp by the other variant's iteration of the
same turn and takes the median: the machine's speed drifts within minutes, and neighbours in time
share it. The process keeps the memory it frees (--host-heap keep: glibc's M_MMAP_MAX 0 and
M_TRIM_THRESHOLD 1 GiB), as in the C++ synthetic benchmark (docs/benchmarks.md explains why).
One host only (DDP's rendezvous is on 127.0.0.1).
"""
import argparse
import ctypes
import os
import random
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torchvision.models

import horovod.torch as hvd


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--model', default='resnet18', help='a torchvision.models constructor')
    p.add_argument('--batch-size', type=int, default=16, help='images per rank per step')
    p.add_argument('--image-size', type=int, default=64)
    p.add_argument('--num-warmup-batches', type=int, default=2)
    p.add_argument('--num-batches-per-iter', type=int, default=2)
    p.add_argument('--num-iters', type=int, default=8)
    p.add_argument('--threads', type=int, default=1, help='torch intra-op threads per rank')
    p.add_argument('--host-heap', choices=['keep', 'glibc'], default='keep')
    return p.parse_args()


def keep_freed_memory():
    libc = ctypes.CDLL('libc.so.6')
    m_trim_threshold, m_mmap_max = -1, -4
    libc.mallopt(m_mmap_max, 0)
    libc.mallopt(m_trim_threshold, 1 << 30)


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def main():
    args = parse()
    if args.host_heap == 'keep':
        keep_freed_memory()
    hvd.init()
    torch.set_num_threads(args.threads)
    port = hvd.broadcast_object(free_port() if hvd.rank() == 0 else None, root_rank=0, name='ddp.port')
    dist.init_process_group('gloo', init_method='tcp://127.0.0.1:%d' % port, rank=hvd.rank(),
                            world_size=hvd.size())
    data = torch.randn(args.batch_size, 3, args.image_size, args.image_size)
    target = torch.randint(0, 1000, (args.batch_size,))

    def build(variant):
        torch.manual_seed(0)
        model = getattr(torchvision.models, args.model)(num_classes=1000)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        if variant.startswith('horovodcpp'):
            optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
            if variant == 'horovodcpp-overlap':
                optimizer._defer_host_gradients = False  # each gradient as backward produces it
        elif variant == 'ddp':
            model = torch.nn.parallel.DistributedDataParallel(model)
        return model, optimizer

    def step(model, optimizer):
        optimizer.zero_grad()
        F.cross_entropy(model(data), target).backward()
        optimizer.step()

    def timed(model, optimizer):
        dist.barrier()
        start = time.perf_counter()
        for _ in range(args.num_batches_per_iter):
            step(model, optimizer)
        elapsed = torch.tensor([time.perf_counter() - start])
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the slowest rank's time
        return args.batch_size * args.num_batches_per_iter * hvd.size() / elapsed.item()

    variants = {v: build(v) for v in ('horovodcpp', 'horovodcpp-overlap', 'ddp', 'none')}
    for model, optimizer in variants.values():
        for _ in range(args.num_warmup_batches):
            step(model, optimizer)
    rates = {v: [] for v in variants}
    for i in range(args.num_iters):
        order = list(variants)
        random.Random(i).shuffle(order)
        for v in order:
            rates[v].append(timed(*variants[v]))
    if hvd.rank() == 0:
        print('Model: %s, batch %d per rank, %dx%d images, %d ranks, %d thread(s) each, torch %s, %d iterations of '
              '%d batches' % (args.model, args.batch_size, args.image_size, args.image_size, hvd.size(), args.threads,
                             torch.__version__, args.num_iters, args.num_batches_per_iter))
        print('| variant | img/sec (all ranks, mean) | horovodcpp / variant (means) | paired median |')
        print('|:--|--:|--:|--:|')
        ours = rates['horovodcpp']
        targets = []
        for v in variants:
            mean = statistics.mean(rates[v])
            if v == 'horovodcpp':
                print('| %s | %.1f | | |' % (v, mean))
                continue
            ratio = statistics.mean(ours) / mean
            paired = statistics.median(a / b for a, b in zip(ours, rates[v]))
            print('| %s | %.1f | %.3fx | %.3fx |' % (v, mean, ratio, paired))
            if v == 'ddp':
                what = 'training throughput at np=%d (%s, batch %d, Python): horovodcpp / DDP (Gloo)' % (
                    hvd.size(), args.model, args.batch_size)
                targets += [(what + ', means', ratio), (what + ', paired median', paired)]
        print()
        for what, value in targets:  # for scripts/bench.sh
            print('TARGET | %s | %.3fx | >= 1.000x | %s' % (what, value, 'PASS' if value >= 1.0 else 'FAIL'))
    # Tearing DDP's Gloo process group down at exit can deadlock in PyTorch 1.13 (a Gloo worker
    # frees a tensor and waits for the GIL, which the thread in ~ProcessGroupGloo holds while it
    # waits for that worker): it hung one run in bench.sh. The results are out; end here.
    hvd.shutdown()
    sys.stdout.flush()
    os._exit(0)


if __name__ == '__main__':
    main()
