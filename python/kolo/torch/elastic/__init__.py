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

torch.distributed (DDP on the ``kolo`` backend) runs in the same loop: a
membership change fails the group's pending collectives with a
RuntimeError that names it (kolo.torch.distributed), which ``run`` turns
into kolo's membership error; the wrapped function makes the epoch's group
first (``kolo.torch.distributed.reinit()``) and wraps DDP again. See
docs/pytorch.md, "Elastic DDP", and examples/torch_ddp_elastic_train.py.
"""

import functools
import re

from kolo import _kolo
from kolo.common.elastic import ObjectState, State, run_fn  # noqa: F401
from kolo.common.exceptions import HostsUpdatedInterrupt  # noqa: F401
from kolo.common.exceptions import HorovodInternalError as _InternalError
from kolo.common.exceptions import translate as _translate
from kolo.torch.elastic.sampler import ElasticSampler  # noqa: F401
from kolo.torch.elastic.state import TorchState  # noqa: F401


# The tag process_group_kolo.cc puts on a collective that a membership
# change ended.
_MEMBERSHIP_TAG = re.compile(r'\[kolo membership=(\w+) code=(\d+)\]')


def membership_error(error):
    """The kolo membership error behind ``error``, a RuntimeError from the
    ``kolo`` torch.distributed backend (directly, or as torch re-raised it
    from DDP's backward), as kolo.common.exceptions.translate makes it
    (HorovodInternalError with ``kolo_membership`` "lost", ...,
    HostsUpdatedInterrupt for a planned change); None when ``error`` is no
    membership change."""
    match = _MEMBERSHIP_TAG.search(str(error))
    if match is None:
        return None
    return _translate(_kolo.Error(int(match.group(2)), str(error),
                                 match.group(1), False))


def run(func):
    """Decorator: ``func(state, ...)`` runs in the elastic retry loop (the
    state is synchronised from rank 0 first; after a membership change it is
    restored or kept, the job moves to its next epoch, the reset callbacks
    run and the state is synchronised again). A torch.distributed collective
    on the ``kolo`` backend that a membership change ended counts as kolo's
    membership error."""

    @functools.wraps(func)
    def translated(state, *args, **kwargs):
        try:
            return func(state, *args, **kwargs)
        except (_InternalError, HostsUpdatedInterrupt):
            raise
        except RuntimeError as e:
            kolo_error = membership_error(e)
            if kolo_error is None:
                raise
            raise kolo_error from e

    return run_fn(translated)
