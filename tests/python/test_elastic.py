"""kolo.torch.elastic without faults (the faults are in
test_example_torch_elastic.py): ObjectState, TorchState and its handlers,
ElasticSampler's sharding and resharding, run()'s retry loop driven by
errors of each membership kind, and the translation of those errors (also
from the text of a torch.distributed backend's RuntimeError)."""

import pytest
import torch

import kolo.torch as hvd
from kolo import _kolo
from kolo.common import elastic as common_elastic
from kolo.common.exceptions import (ABORTED, HorovodInternalError,
                                    HostsUpdatedInterrupt, translate)
from kolo.torch.elastic.state import (ModelStateHandler,
                                      OptimizerStateHandler,
                                      SamplerStateHandler, StateHandler,
                                      get_handler_registry,
                                      set_handler_registry)


def test_module_layout():
    assert hvd.elastic.run and hvd.elastic.TorchState and \
        hvd.elastic.ElasticSampler and hvd.elastic.ObjectState
    assert hvd.elastic.HostsUpdatedInterrupt is HostsUpdatedInterrupt
    kinds = [k for k, _ in get_handler_registry()]
    assert kinds == [torch.nn.Module, torch.optim.Optimizer,
                     hvd.elastic.ElasticSampler]


def test_translate_membership_kinds():
    def error(kind, skip=False):
        return _kolo.Error(ABORTED, 'epoch 3 ended: w2 lost', kind, skip)

    lost = translate(error('lost'))
    assert isinstance(lost, HorovodInternalError)
    assert lost.kolo_membership == 'lost' and lost.kolo_code == ABORTED
    joined = translate(error('hosts_updated', False))
    assert isinstance(joined, HostsUpdatedInterrupt)
    assert joined.skip_sync is False and 'w2 lost' in str(joined)
    left = translate(error('hosts_updated', True))
    assert left.skip_sync is True
    assert translate(error('leaving')).kolo_membership == 'leaving'
    evicted = translate(error('evicted'))
    assert isinstance(evicted, HorovodInternalError)
    assert evicted.kolo_membership == 'evicted'
    plain = translate(_kolo.Error(ABORTED, 'shut down', '', False))
    assert plain.kolo_membership == ''


def test_object_state_save_restore_sync():
    state = hvd.elastic.ObjectState(hvd.broadcast_object, hvd.rank,
                                    epoch=0, batch=hvd.rank() * 10)
    assert state.epoch == 0 and state.batch == hvd.rank() * 10
    state.sync()  # rank 0's saved values everywhere
    assert state.batch == 0
    state.epoch, state.batch = 2, 7
    state.save()
    state.epoch, state.batch = 5, 99
    state.restore()
    assert (state.epoch, state.batch) == (2, 7)


def test_commit_outside_elastic_jobs_only_saves():
    assert not _kolo.is_elastic_job()
    state = hvd.elastic.ObjectState(hvd.broadcast_object, hvd.rank, step=1)
    state.step = 4
    state.commit()  # the membership check is a no-op here
    state.step = 9
    state.restore()
    assert state.step == 4


def test_torch_state_restores_and_syncs_model_and_optimizer():
    torch.manual_seed(100 + hvd.rank())  # every rank different
    model = torch.nn.Linear(4, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    state = hvd.elastic.TorchState(model, opt, epoch=3)
    assert isinstance(state._handlers['model'], ModelStateHandler)
    assert isinstance(state._handlers['optimizer'], OptimizerStateHandler)
    state.sync()  # rank 0's parameters and optimizer state
    ref = [p.detach().clone() for p in model.parameters()]
    gathered = hvd.allgather(torch.cat([p.flatten() for p in ref])[None])
    assert torch.equal(gathered, gathered[:1].expand_as(gathered))
    state.commit()
    # One step changes parameters and momentum; restore undoes both.
    model(torch.ones(2, 4)).sum().backward()
    opt.step()
    assert not torch.equal(next(model.parameters()), ref[0])
    state.restore()
    for p, r in zip(model.parameters(), ref):
        assert torch.equal(p, r)
    # The committed momentum: zeros (broadcast_optimizer_state made the
    # buffers); the step had made them non-zero.
    assert all(s.get('momentum_buffer') is None or
               not s['momentum_buffer'].any() for s in opt.state.values())
    # Assigning a new model replaces the handled object.
    other = torch.nn.Linear(4, 3)
    state.model = other
    assert state._handlers['model'].value is other and state.model is other
    assert state.epoch == 3


def _global_batches(sampler, n, batch):
    """The sequence of global batches (as sets) when n ranks take `batch`
    samples each, from the sampler's current progress."""
    out = []
    shards = []
    for r in range(n):
        sampler._reshard(n, r)
        shards.append(list(iter(sampler)))
    for b in range(len(shards[0]) // batch):
        out.append(frozenset(i for s in shards
                             for i in s[b * batch:(b + 1) * batch]))
    return out


def test_sampler_covers_the_epoch_once_at_any_size():
    data = list(range(50))
    sampler = hvd.elastic.ElasticSampler(data, shuffle=True, seed=3)
    for n in (1, 2, 3, 4, 7):
        seen = []
        for r in range(n):
            sampler._reshard(n, r)
            assert len(sampler) == -(-50 // n)
            seen += list(iter(sampler))
        assert set(seen) == set(data)               # every sample
        assert len(seen) - len(set(seen)) == (-50) % n  # padding only


def test_sampler_global_batches_do_not_depend_on_size_or_resets():
    data = list(range(96))
    sampler = hvd.elastic.ElasticSampler(data, shuffle=True, seed=5)
    sampler.set_epoch(1)
    ref = _global_batches(sampler, 1, 12)
    assert _global_batches(sampler, 2, 6) == ref
    assert _global_batches(sampler, 4, 3) == ref
    # Three global batches processed at 4 ranks (record_batch on one rank
    # records every rank's part), then a reshard at 3 ranks goes on with
    # the fourth batch of the same sequence.
    sampler._reshard(4, 1)
    for b in range(3):
        sampler.record_batch(b, 3)
    assert sampler.processed_indices == set().union(*ref[:3])
    assert _global_batches(sampler, 3, 4) == ref[3:]
    # The epoch's end: a new epoch starts from nothing processed.
    sampler.set_epoch(2)
    assert not sampler.processed_indices and len(sampler) * hvd.size() >= 96


def test_sampler_state_sync_ignores_progress_of_another_epoch():
    # A worker back from an eviction may hold an earlier epoch's progress:
    # only ranks in rank 0's epoch are merged.
    sampler = hvd.elastic.ElasticSampler(list(range(40)), shuffle=False)
    handler = SamplerStateHandler(sampler)
    sampler.epoch = 4 if hvd.rank() % 2 == 0 else 3
    sampler.processed_indices = {30 + hvd.rank()}
    handler.sync()
    assert sampler.epoch == 4
    assert sampler.processed_indices == {30 + r for r in range(hvd.size())
                                         if r % 2 == 0}


def test_sampler_state_sync_merges_every_ranks_progress():
    sampler = hvd.elastic.ElasticSampler(list(range(40)), shuffle=False)
    handler = SamplerStateHandler(sampler)
    sampler.record_indices({hvd.rank(), 20 + hvd.rank()})
    handler.sync()
    expected = set(range(hvd.size())) | set(range(20, 20 + hvd.size()))
    assert sampler.processed_indices == expected
    assert len(sampler) == -(-(40 - len(expected)) // hvd.size())
    handler.save()
    sampler.set_epoch(9)
    handler.restore()
    assert sampler.processed_indices == expected and sampler.epoch == 0


class _Recorder(common_elastic.ObjectState):
    def __init__(self):
        super().__init__(hvd.broadcast_object, hvd.rank, value=0)
        self.calls = []

    def save(self):
        self.calls.append('save')
        super().save()

    def restore(self):
        self.calls.append('restore')
        super().restore()

    def sync(self):
        self.calls.append('sync')
        super().sync()


def _error(kind, skip=False):
    return translate(_kolo.Error(ABORTED, f'test: {kind}', kind, skip))


def test_run_rolls_back_on_a_lost_worker_and_keeps_on_a_planned_change():
    state = _Recorder()
    resets = []
    state.register_reset_callbacks([lambda: resets.append(state.value)])
    errors = [_error('lost'), _error('hosts_updated', True),
              _error('hosts_updated', False)]

    def train(st, bump):
        st.value += bump
        if errors:
            e = errors.pop(0)
            if isinstance(e, HostsUpdatedInterrupt):
                st.save()  # as State.commit() does before its check
            raise e
        return st.value

    wrapped = common_elastic.run_fn(train, reset=lambda: None)
    assert wrapped(state, 5) == 15
    # sync; lost: restore (value 0), sync; planned with skip_sync: no
    # restore, no sync; planned with a newcomer: sync.
    assert state.calls == ['sync', 'restore', 'sync', 'save', 'save', 'sync']
    assert resets == [0, 5, 10]


def test_run_raises_errors_that_are_not_membership_changes():
    state = _Recorder()

    def train(_):
        raise HorovodInternalError('ranks disagreed on an op')

    with pytest.raises(HorovodInternalError, match='disagreed'):
        common_elastic.run_fn(train, reset=lambda: None)(state)
    assert state.calls == ['sync']


def test_a_backend_runtime_error_naming_a_membership_change_is_kolos():
    # As DDP re-raises the kolo backend's error from its comm hook's future.
    text = ('Got the following error when running the callback: '
            'RuntimeError: kolo backend: allreduce c10d.ab.0.0.3 failed: '
            'epoch 1 ended: worker w2 lost [ABORTED]; kolo membership change '
            '(lost): ... [kolo membership=lost code=10]')
    lost = hvd.elastic.membership_error(RuntimeError(text))
    assert isinstance(lost, HorovodInternalError)
    assert lost.kolo_membership == 'lost' and lost.kolo_code == ABORTED
    assert 'worker w2 lost' in str(lost)
    joined = hvd.elastic.membership_error(RuntimeError(
        'x [kolo membership=hosts_updated code=10]'))
    assert isinstance(joined, HostsUpdatedInterrupt)
    assert hvd.elastic.membership_error(
        RuntimeError('kolo backend: allreduce c10d.0.0.1 failed: shapes '
                      'differ [INVALID_ARGUMENT]')) is None


def test_run_raises_runtime_errors_that_name_no_membership_change():
    state = _Recorder()

    def train(_):
        raise RuntimeError('kolo backend: allreduce c10d.0.0.1 failed: '
                           'shapes differ [FAILED_PRECONDITION]')

    with pytest.raises(RuntimeError, match='shapes differ') as info:
        hvd.elastic.run(train)(state)
    assert type(info.value) is RuntimeError  # pylint: disable=unidiomatic-typecheck
    assert state.calls == ['sync']


def test_handler_registry_can_be_replaced():
    saved = get_handler_registry()

    class Counter:
        n = 0

    class CounterHandler(StateHandler):
        def save(self):
            self.saved = self.value.n

        def restore(self):
            self.value.n = self.saved

        def sync(self):
            self.value.n = hvd.broadcast_object(self.value.n)

    try:
        set_handler_registry(saved + [(Counter, CounterHandler)])
        c = Counter()
        state = hvd.elastic.TorchState(counter=c)
        assert isinstance(state._handlers['counter'], CounterHandler)
        c.n = 4
        state.save()
        c.n = 8
        state.restore()
        assert c.n == 4
    finally:
        set_handler_registry(saved)
