"""horovod.run on the two network-namespace hosts of netns_run.sh (run on the first):
    two_hosts_caller.py AGENT results|missing_file HOSTS
prints one line, RESULTS [...] or ERROR <the first line of the error>, for the script to check."""
import os
import socket
import sys

import horovod

agent, mode, hosts = sys.argv[1:]
launch = dict(num_proc=2 * len(hosts.split(',')), hosts=hosts, network_interfaces=['10.213.0.0/24'],
              mpi_args=f'--mca btl tcp,self --mca plm_rsh_agent {agent}', start_timeout=20,
              stdout=open(os.devnull, 'w'), stderr=open(os.devnull, 'w'))


def each_rank():
    import torch
    import horovod.torch as hvd
    hvd.init()
    total = hvd.allreduce(torch.tensor([hvd.rank() + 1.0]), op=hvd.Sum).item()
    # Megabytes cross the link, cut in pieces among the other ranks' output.
    return hvd.rank(), socket.gethostname(), hvd.cross_rank(), total, bytes([hvd.rank()]) * 3_000_000


if mode == 'results':
    results = horovod.run(each_rank, **launch)
    print('RESULTS', [(*r[:4], r[4] == bytes([r[0]]) * 3_000_000) for r in results])
else:
    big = bytes(600 * 1024)  # over the 512 KiB that travel in the environment: a file

    def needs_the_file():
        return len(big)

    try:
        horovod.run(needs_the_file, **launch)
        print('RESULTS none: no error')
    except RuntimeError as e:
        print('ERROR', str(e).splitlines()[0])
