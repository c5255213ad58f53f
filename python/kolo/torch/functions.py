"""kolo.torch.functions: broadcasting model and optimizer state, and small
Python objects, as horovod.torch.functions.

- ``broadcast_parameters(params, root_rank)``: a dict (taken in sorted key
  order) or a list of tensors or ``(name, tensor)`` pairs, broadcast in place
  from ``root_rank``; anything else (a generator too) is a ValueError.
- ``broadcast_optimizer_state(optimizer, root_rank, model=None)``: the
  optimizer's state tensors in place (named ``<state key>.<occurrence>``), its
  scalar state and param-group options (``<key>.<group index>``) in one
  ``broadcast_object``; a fresh optimizer's state is created first by a step
  on zero gradients. Horovod's quirk is kept: broadcast scalar *state* values
  land in the state_dict copy, not in the optimizer (options do land in the
  optimizer's param groups).
- ``broadcast_object(obj, root_rank=0, name=None, process_set=...)`` and
  ``allgather_object(obj, name=None)`` through cloudpickle.

Every rank must call these in the same order (they are collectives).
Thread-safety: as the collectives they use.
"""

import collections
import io

import torch

from kolo.common.basics import rank
from kolo.common.process_sets import global_process_set
from kolo.torch.mpi_ops import (allgather, broadcast_, broadcast_async_,
                                synchronize)


def broadcast_parameters(params, root_rank):
    """Broadcasts the parameters (a model's state_dict() or
    named_parameters()) from root_rank to every rank, in place."""
    if isinstance(params, dict):
        params = sorted(params.items())
    elif isinstance(params, list):
        # A list of tensors, or of (name, tensor) pairs.
        params = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        raise ValueError('invalid params of type: %s' % type(params))
    handles = [broadcast_async_(p, root_rank, name) for name, p in params]
    for handle in handles:
        synchronize(handle)


def broadcast_object(obj, root_rank=0, name=None,
                     process_set=global_process_set):
    """Serialises obj on root_rank (cloudpickle) and returns it on every
    rank of the set."""
    import cloudpickle  # pylint: disable=import-outside-toplevel
    if name is None:
        name = type(obj).__name__
    if rank() == root_rank:
        buf = io.BytesIO()
        cloudpickle.dump(obj, buf)
        payload = torch.ByteTensor(bytearray(buf.getvalue()))
        length = torch.IntTensor([payload.shape[0]])
        broadcast_(length, root_rank, name + '.sz', process_set)
    else:
        length = torch.IntTensor([0])
        broadcast_(length, root_rank, name + '.sz', process_set)
        payload = torch.ByteTensor(int(length.item()))
    broadcast_(payload, root_rank, name + '.t', process_set)
    if rank() != root_rank:
        obj = cloudpickle.loads(payload.numpy().tobytes())
    return obj


def allgather_object(obj, name=None):
    """Every rank's obj (cloudpickle), as a list in rank order."""
    import cloudpickle  # pylint: disable=import-outside-toplevel
    if name is None:
        name = type(obj).__name__
    payload = torch.ByteTensor(bytearray(cloudpickle.dumps(obj)))
    lengths = allgather(torch.IntTensor([payload.shape[0]]), name=name + '.sz')
    gathered = allgather(payload, name=name + '.t')
    out, offset = [], 0
    for n in lengths.tolist():
        out.append(cloudpickle.loads(gathered[offset:offset + n].numpy()
                                     .tobytes()))
        offset += n
    return out


def _sparse_parameters(model):
    """The parameters of the model's sparse embeddings."""
    if model is None:
        return set()
    return {id(m.weight) for m in model.modules()
            if isinstance(m, torch.nn.Embedding) and m.sparse}


def broadcast_optimizer_state(optimizer, root_rank, model=None):
    """Broadcasts the optimizer's state (and its param groups' options) from
    root_rank to every rank."""
    from kolo.torch.optimizer import \
        _DistributedOptimizer  # pylint: disable=import-outside-toplevel
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError('cannot broadcast torch.optim.LBFGS state')
    state_dict = optimizer.state_dict()
    if len(state_dict['state']) == 0:
        # A fresh optimizer has no state yet: one step on zero gradients
        # creates it (as on every rank, so the shapes agree).
        sparse = _sparse_parameters(model)
        for group in optimizer.param_groups:
            for p in group['params']:
                if not p.requires_grad or id(p) in state_dict['state']:
                    continue
                p.grad = p.data.new(p.size()).zero_()
                if isinstance(optimizer, torch.optim.SparseAdam) or \
                        id(p) in sparse:
                    p.grad = p.grad.to_sparse()
        # A DistributedOptimizer's own step() would allreduce: step the
        # wrapped optimizer class directly.
        if optimizer.__module__ == _DistributedOptimizer.__module__:
            super(optimizer.__class__, optimizer).step()
        else:
            optimizer.step()
        state_dict = optimizer.state_dict()
    if len(state_dict['state']) == 0:
        return  # a stateless optimizer (plain SGD): nothing to send

    tensors = []
    scalars = {}
    # key -> where a broadcast scalar goes back
    option_of = {}
    state_of = {}
    occurrences = collections.defaultdict(int)
    for index, group in enumerate(state_dict['param_groups']):
        for option_key, option_value in group.items():
            if option_key == 'params':
                continue
            key = '%s.%d' % (option_key, index)
            scalars[key] = option_value
            option_of[key] = (index, option_key)
        for pid in group['params']:
            if pid not in state_dict['state']:
                continue  # a parameter that does not require grad
            for name, value in state_dict['state'][pid].items():
                occurrences[name] += 1
                key = '%s.%d' % (str(name), occurrences[name])
                if torch.is_tensor(value):
                    tensors.append((key, value))
                else:
                    scalars[key] = value
                    state_of[key] = (pid, name)
    broadcast_parameters(tensors, root_rank)
    scalars = broadcast_object(scalars, root_rank,
                               name='optimizer_state_scalars')
    for key, value in scalars.items():
        if key in option_of:
            index, option_key = option_of[key]
            optimizer.param_groups[index][option_key] = value
        elif key in state_of:
            pid, name = state_of[key]
            state_dict['state'][pid][name] = value
