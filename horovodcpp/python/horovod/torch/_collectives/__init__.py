"""The collectives behind horovod.torch.mpi_ops, one module each (allreduce, allgather, broadcast,
alltoall, reducescatter), with what they share: the handle table (handles.py) and the argument
rules (arguments.py). Private: mpi_ops is the module users and Horovod's tests import."""
