"""kolo.torch.elastic: horovod.torch.elastic on kolo's elastic layer.

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            for state.batch, (x, y) in enumerate(loader):
                ...
                state.commit()

    state = hvd.elastic.TorchState(model, optimizer, epoch=0, batch=0)
    train(state)

Launch with ``kolorun -np 4 --min-np 2 --max-np 4 /usr/bin/python3 ...``.
A lost worker makes the survivors roll back to the last ``commit()`` and go
on at the new size without restarting; a joining worker (a replacement, a
new host) receives rank 0's state at the next commit; an ``ElasticSampler``
reshards the data that is left. See kolo.common.elastic for the loop and its
differences from Horovod.
"""

from kolo.common.elastic import ObjectState, State, run_fn  # noqa: F401
from kolo.common.exceptions import HostsUpdatedInterrupt  # noqa: F401
from kolo.torch.elastic.sampler import ElasticSampler  # noqa: F401
from kolo.torch.elastic.state import TorchState  # noqa: F401


def run(func):
    """Decorator: ``func(state, ...)`` runs in the elastic retry loop (the
    state is synchronised from rank 0 first; after a membership change it is
    restored or kept, the job moves to its next epoch, the reset callbacks
    run and the state is synchronised again)."""
    return run_fn(func)
