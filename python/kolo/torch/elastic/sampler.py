"""ElasticSampler: a distributed sampler that reshards what is left of an
epoch when the number of ranks changes (horovod.torch.elastic.sampler).

Each epoch visits every sample once, in an order drawn from ``seed +
epoch`` (``shuffle``); rank r takes every size()-th index of what is left,
padded (by repeating the first indices) to a multiple of size(). The
training loop records what it processed (``record_batch``); a membership
change (its ``TorchState`` syncs it) removes the processed indices and
reshards the rest over the new ranks.

kolo's guarantees beyond Horovod's:
  - the order of an epoch is fixed before the processed indices are taken
    out (Horovod shuffles what is left), so the global batches after a
    membership change continue the same sequence as without it when the
    global batch size stays the same (per-rank batch = global / size());
  - ``record_batch(b, n)`` records batch b of *every* rank: the ranks step
    together (each step's allreduce completes on all of them), so a batch
    that one rank finished, all did -- and a rank that is lost does not
    take its part of the progress with it. ``record_indices`` records the
    indices given, as Horovod.

Thread-safety: used by the training loop's thread (and a DataLoader's
main-process iteration).
"""

import math

import torch
import torch.utils.data

from kolo.common.basics import rank, size


class ElasticSampler(torch.utils.data.Sampler):
    """Sampler for elastic jobs; pass it to a DataLoader and to TorchState
    (``TorchState(model, optimizer, sampler=sampler)``)."""

    def __init__(self, dataset, shuffle=True, seed=0):
        super().__init__(dataset)
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_indices = set()
        self.num_replicas = 0
        self.rank = 0
        self.remaining_indices = []
        self.num_samples = 0
        self.total_size = 0
        self.indices = []     # this rank's indices of the current pass
        self._all = []        # every rank's, padded (rank r: self._all[r::n])
        self.reset()

    def set_epoch(self, epoch):
        """Starts epoch `epoch`: nothing processed yet."""
        self.epoch = epoch
        self.processed_indices = set()
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Records batch `batch_idx` (`batch_size` samples per rank) of the
        current pass as processed on every rank."""
        n = max(self.num_replicas, 1)
        lo = batch_idx * batch_size
        hi = min(lo + batch_size, self.num_samples)
        if hi > lo:
            self.record_indices(self._all[lo * n:hi * n])

    def record_indices(self, indices):
        """Records the dataset indices `indices` as processed."""
        self.processed_indices.update(indices)

    def get_indices(self, batch_idx, batch_size):
        """This rank's indices of batch `batch_idx` of the current pass."""
        lo = batch_idx * batch_size
        return self.indices[lo:min(lo + batch_size, len(self.indices))]

    def state_dict(self):
        """The epoch and the processed indices (what TorchState saves)."""
        return {'epoch': self.epoch,
                'processed_indices': set(self.processed_indices)}

    def load_state_dict(self, state_dict):
        """Takes a state_dict() back and reshards what is left."""
        self.epoch = state_dict['epoch']
        self.processed_indices = set(state_dict['processed_indices'])
        self.reset()

    def reset(self):
        """Reshards what is left of the epoch over the current ranks."""
        self._reshard(size(), rank())

    def _reshard(self, num_replicas, replica):
        self.num_replicas = num_replicas
        self.rank = replica
        if self.shuffle:
            g = torch.Generator()
            g.manual_seed(self.seed + self.epoch)
            order = torch.randperm(len(self.dataset), generator=g).tolist()
        else:
            order = list(range(len(self.dataset)))
        self.remaining_indices = [i for i in order
                                  if i not in self.processed_indices]
        self.num_samples = int(math.ceil(
            len(self.remaining_indices) / self.num_replicas))
        self.total_size = self.num_samples * self.num_replicas
        padded = list(self.remaining_indices)
        while padded and len(padded) < self.total_size:
            padded += padded[:self.total_size - len(padded)]
        self._all = padded
        self.indices = padded[self.rank:self.total_size:self.num_replicas]

    def __iter__(self):
        return iter(self.indices)

    def __len__(self):
        return self.num_samples
