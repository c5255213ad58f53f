"""The store an elastic epoch's process group is made with
(kolo.torch.distributed.reinit): a ``torch.distributed.Store`` whose
operations run on kolo itself, over the epoch's ranks, instead of a
TCPStore that one rank serves.

Why not a TCPStore: in an elastic job any rank may die at any time, rank 0
included, and torch 1.13's TCPStore client does not survive its server's
death (a connection reset in its background thread ends the process with
std::terminate; an orderly close leaves that thread spinning). A TCPStore
is also an unauthenticated listener, where everything else of kolo proves
the job secret.

What torch asks of the store here is its store-based barrier
(init_process_group and new_group: every rank adds 1 to a key, then polls
``add(key, 0)`` until the count is the world size). So ``add`` is a
collective: every rank of the epoch calls it with the same key in the same
order, kolo sums the amounts, and every rank gets the same count. A rank
lost meanwhile makes it raise kolo's membership error, which
kolo.torch.elastic.run acts on. ``set``/``get``/``check``/``wait`` and the
rest are refused with a clear error: a value set on one rank could not be
read on another without a collective every rank joins.

Thread-safety: called from the thread that makes the group (torch calls the
store where init_process_group/new_group run); the counters are guarded by
a lock all the same.
"""

import threading

import torch
import torch.distributed as dist


class EpochStore(dist.Store):
    """Store of one epoch's groups; ``token`` names its collectives (the
    same on every rank, new for each epoch)."""

    def __init__(self, token):
        super().__init__()
        self._token = token
        self._lock = threading.Lock()
        self._counts = {}  # key -> (its value, how many adds so far)

    def add(self, key, amount):  # pylint: disable=arguments-differ
        """Adds ``amount`` of every rank to ``key``; returns the sum so far.
        Collective: every rank calls it with the same key, in order."""
        # pylint: disable=import-outside-toplevel
        from kolo.torch.mpi_ops import Sum, allreduce
        with self._lock:
            value, n = self._counts.get(key, (0, 0))
            self._counts[key] = (value, n + 1)
        total = allreduce(torch.tensor([int(amount)], dtype=torch.int64),
                          op=Sum, name=f'kolo.store.{self._token}.{key}.{n}')
        with self._lock:
            value, n = self._counts[key]
            value += int(total.item())
            self._counts[key] = (value, n)
        return value

    def _refuse(self, what):
        raise RuntimeError(
            f"kolo's epoch store (kolo.torch.distributed.reinit) supports "
            f'only add(), the collective torch barriers on; {what}() would '
            'need a value set on one rank to be seen on the others. Share '
            'values through kolo.torch.broadcast_object instead')

    def set(self, key, value):  # pylint: disable=arguments-differ
        self._refuse('set')

    def get(self, key):  # pylint: disable=arguments-differ
        self._refuse('get')

    def compare_set(self, key, expected, desired):  # pylint: disable=arguments-differ
        self._refuse('compare_set')

    def check(self, keys):  # pylint: disable=arguments-differ
        self._refuse('check')

    def wait(self, keys, timeout=None):  # pylint: disable=arguments-differ
        self._refuse('wait')

    def delete_key(self, key):  # pylint: disable=arguments-differ
        self._refuse('delete_key')

    def num_keys(self):  # pylint: disable=arguments-differ
        self._refuse('num_keys')
