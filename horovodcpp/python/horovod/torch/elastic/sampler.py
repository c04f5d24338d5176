"""ElasticSampler (Horovod's horovod.torch.elastic.ElasticSampler): a DistributedSampler that
knows how many samples of the epoch the job has processed, so a job resumed at another world size
goes on with the rest of the epoch, laid out again over the ranks it has now."""
import math
import random

import torch.utils.data

from horovod.torch.mpi_ops import rank, size


class ElasticSampler(torch.utils.data.Sampler):
    """Each rank's indices of the unprocessed part of the epoch: the epoch's order (shuffled
    with ``seed + epoch``, the same on every rank) without its first ``processed_num`` indices,
    padded to a multiple of the ranks and dealt round-robin. Call ``record_batch`` after each
    step, ``set_epoch`` at the end of each epoch; keep the sampler in a TorchState."""

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_num = 0
        self.reset()

    def set_epoch(self, epoch):
        """Starts ``epoch`` with nothing processed."""
        self.epoch = epoch
        self.processed_num = 0
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Marks one step done on every rank: ``batch_size`` samples each."""
        self.processed_num += batch_size * self.num_replicas

    def state_dict(self):
        return {'epoch': self.epoch, 'processed_num': self.processed_num}

    def load_state_dict(self, state_dict):
        self.epoch = state_dict['epoch']
        self.processed_num = state_dict['processed_num']
        self.reset()

    def reset(self):
        """Lays the rest of the epoch out again for this rank of the current world size."""
        self.num_replicas = size()
        self.rank = rank()
        order = list(range(len(self.dataset)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(order)
        self.remaining_indices = order[self.processed_num:]
        self.num_samples = int(math.ceil(len(self.remaining_indices) / self.num_replicas))
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self):
        indices = list(self.remaining_indices)
        indices += indices[:self.total_size - len(indices)]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples
