"""Horovod's synthetic benchmark for horovod.torch on horovodcpp, beside PyTorch's own
DistributedDataParallel (Gloo, CPU) in the same launch: images per second of a torchvision model
training on random data, both on the same ranks, in alternating rounds.

    hvdrun -np 2 /usr/bin/python3 examples/python/synthetic_benchmark.py --model resnet18

Each round times both (the order alternates); the table shows each mode's mean over the rounds
(images per second over all ranks) and the ratio ours / DDP per round. One host only (DDP's
rendezvous is on 127.0.0.1).
"""
import argparse
import socket
import statistics
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
    p.add_argument('--num-warmup-batches', type=int, default=3)
    p.add_argument('--num-batches-per-iter', type=int, default=5)
    p.add_argument('--num-iters', type=int, default=3, help='timed iterations per mode per round')
    p.add_argument('--rounds', type=int, default=3)
    p.add_argument('--threads', type=int, default=1, help='torch intra-op threads per rank')
    return p.parse_args()


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def main():
    args = parse()
    hvd.init()
    torch.set_num_threads(args.threads)
    port = hvd.broadcast_object(free_port() if hvd.rank() == 0 else None, root_rank=0, name='ddp.port')
    dist.init_process_group('gloo', init_method='tcp://127.0.0.1:%d' % port, rank=hvd.rank(),
                            world_size=hvd.size())
    data = torch.randn(args.batch_size, 3, args.image_size, args.image_size)
    target = torch.randint(0, 1000, (args.batch_size,))

    def build(mode):
        torch.manual_seed(0)
        model = getattr(torchvision.models, args.model)(num_classes=1000)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        if mode == 'horovodcpp':
            optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
            hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        else:
            model = torch.nn.parallel.DistributedDataParallel(model)
        return model, optimizer

    def step(model, optimizer):
        optimizer.zero_grad()
        F.cross_entropy(model(data), target).backward()
        optimizer.step()

    def images_per_second(model, optimizer, batches):
        dist.barrier()
        start = time.perf_counter()
        for _ in range(batches):
            step(model, optimizer)
        elapsed = torch.tensor([time.perf_counter() - start])
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the slowest rank's time
        return args.batch_size * batches * hvd.size() / elapsed.item()

    modes = {mode: build(mode) for mode in ('horovodcpp', 'ddp')}
    for model, optimizer in modes.values():
        for _ in range(args.num_warmup_batches):
            step(model, optimizer)
    rates = {mode: [] for mode in modes}
    for r in range(args.rounds):
        order = ['horovodcpp', 'ddp'] if r % 2 == 0 else ['ddp', 'horovodcpp']
        for mode in order:
            rates[mode].append(statistics.mean(images_per_second(*modes[mode], args.num_batches_per_iter)
                                               for _ in range(args.num_iters)))
    if hvd.rank() == 0:
        ratios = [a / b for a, b in zip(rates['horovodcpp'], rates['ddp'])]
        print('Model: %s, batch %d per rank, %dx%d images, %d ranks, %d thread(s) each, torch %s'
              % (args.model, args.batch_size, args.image_size, args.image_size, hvd.size(), args.threads,
                 torch.__version__))
        print('| mode | img/sec (all ranks, mean of %d rounds) | per round |' % args.rounds)
        print('|:--|--:|:--|')
        for mode in modes:
            print('| %s | %.1f | %s |' % (mode, statistics.mean(rates[mode]),
                                        ', '.join('%.1f' % x for x in rates[mode])))
        print('| horovodcpp / ddp | %.3fx | %s |' % (statistics.mean(rates['horovodcpp']) / statistics.mean(rates['ddp']),
                                                    ', '.join('%.3f' % x for x in ratios)))
    dist.destroy_process_group()


if __name__ == '__main__':
    main()
