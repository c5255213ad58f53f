"""TorchState and its handlers (horovod.torch.elastic.state): the model,
the optimizer and ElasticSamplers are saved, restored and synchronised by a
handler chosen by type (``get_handler_registry`` / ``set_handler_registry``);
every other keyword argument is a plain attribute (ObjectState).

    state = hvd.elastic.TorchState(model, optimizer, sampler=sampler,
                                   epoch=0, batch=0)

save() deep-copies the model's and optimizer's state dicts (the commit a
rollback returns to); restore() loads them back; sync() broadcasts rank
0's parameters and optimizer state and merges the samplers' progress.

Thread-safety: used by the training loop's thread.
"""

import copy

import torch

from kolo.common.basics import rank
from kolo.common.elastic import ObjectState
from kolo.torch.elastic.sampler import ElasticSampler
from kolo.torch.functions import (allgather_object, broadcast_object,
                                  broadcast_optimizer_state,
                                  broadcast_parameters)


class StateHandler:
    """How one kind of object is saved, restored and synchronised."""

    def __init__(self, value):
        self.value = value

    def save(self):
        raise NotImplementedError()

    def restore(self):
        raise NotImplementedError()

    def sync(self):
        raise NotImplementedError()

    def set_value(self, value):
        self.value = value
        self.save()


class ModelStateHandler(StateHandler):
    def __init__(self, model):
        super().__init__(model)
        self._saved = copy.deepcopy(model.state_dict())

    def save(self):
        self._saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self._saved)

    def sync(self):
        broadcast_parameters(self.value.state_dict(), root_rank=0)


class OptimizerStateHandler(StateHandler):
    def __init__(self, optimizer):
        super().__init__(optimizer)
        self._saved = copy.deepcopy(optimizer.state_dict())

    def save(self):
        self._saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self._saved)

    def sync(self):
        broadcast_optimizer_state(self.value, root_rank=0)


class SamplerStateHandler(StateHandler):
    def __init__(self, sampler):
        super().__init__(sampler)
        self._saved = copy.deepcopy(sampler.state_dict())

    def save(self):
        self._saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self._saved)

    def sync(self):
        # Every rank's progress in rank 0's epoch, merged, then rank 0's
        # view to all. A worker that rejoins after an eviction may still
        # hold an earlier epoch's progress: merging it would skip samples
        # of this epoch that nobody trained on.
        parts = allgather_object((self.value.epoch,
                                  set(self.value.processed_indices)))
        processed = set()
        for epoch, part in parts:
            if epoch == parts[0][0]:
                processed |= part
        state = self.value.state_dict()
        state['processed_indices'] = processed
        self.value.load_state_dict(broadcast_object(state, root_rank=0))


_handler_registry = [
    (torch.nn.Module, ModelStateHandler),
    (torch.optim.Optimizer, OptimizerStateHandler),
    (ElasticSampler, SamplerStateHandler),
]


def get_handler_registry():
    """The (type, handler class) pairs TorchState consults, in order."""
    return _handler_registry


def set_handler_registry(registry):
    global _handler_registry
    _handler_registry = registry


def _handler_for(value):
    for kind, handler in _handler_registry:
        if isinstance(value, kind):
            return handler(value)
    return None


class TorchState(ObjectState):
    """State of a PyTorch training job: ``model``, ``optimizer`` and any
    keyword arguments (samplers get a handler; others are plain
    attributes). Assigning a new model/optimizer/sampler to its attribute
    replaces the handled object (and saves it)."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        kwargs.update(model=model, optimizer=optimizer)
        handlers, plain = {}, {}
        for name, value in kwargs.items():
            handler = _handler_for(value) if value is not None else None
            if handler is None:
                plain[name] = value
            else:
                handlers[name] = handler
        object.__setattr__(self, '_handlers', handlers)
        for name, handler in handlers.items():
            object.__setattr__(self, name, handler.value)
        super().__init__(bcast_object=broadcast_object, get_rank=rank,
                         **plain)

    def save(self):
        for handler in self._handlers.values():
            handler.save()
        super().save()

    def restore(self):
        for handler in self._handlers.values():
            handler.restore()
        super().restore()

    def sync(self):
        for handler in self._handlers.values():
            handler.sync()
        super().sync()

    def reset(self):
        """After a membership change: samplers reshard over the new ranks
        (again after sync(), which merges their progress)."""
        for handler in self._handlers.values():
            if isinstance(handler, SamplerStateHandler):
                handler.value.reset()

    def __setattr__(self, name, value):
        handlers = self.__dict__.get('_handlers', {})
        if name in handlers:
            handlers[name].set_value(value)
        super().__setattr__(name, value)
