"""Elastic training in Python (horovod.common.elastic's model): state that
survives membership changes, and the retry loop ``run_fn``, on kolo's C++
elastic layer (include/kolo/elastic.h).

How a membership change reaches Python: every pending op of a survivor
fails with ``HorovodInternalError`` whose ``kolo_membership`` is ``"lost"``
(workers were lost: roll back to the last commit), or ``State.commit()``
raises ``HostsUpdatedInterrupt`` (workers joined or left at this commit: go
on from it). ``run_fn`` then waits for the next epoch -- the survivors, with
ranks reassigned in their old order, newcomers appended -- where Horovod
shuts down and initialises again; kolo keeps the process's connection to
its coordinator, so no re-rendezvous is needed. Then the state's reset
callbacks run and rank 0's state is broadcast to every rank (skipped after
a change with no newcomer, as Horovod's ``skip_sync``).

Two differences from Horovod, both on the side of not hiding faults:
  - a ``HorovodInternalError`` that is not a membership change (ranks
    disagreed on an op, the job ended) is raised, not retried: retrying it
    would fail the same way;
  - a worker that the coordinator evicted (it was stopped or cut off, then
    came back) joins the job again as a newcomer and receives the state;
    so does every worker of a job whose standalone coordinator was lost and
    restarted at its address within the lease (KOLO_LEASE_SECONDS);
    a worker asked to leave (SIGTERM in an elastic job, or
    ``kolo._kolo.request_leave()``) shuts kolo down and exits with status 0
    at its next commit.

Thread-safety: a State and run_fn are used by one thread (the training
loop).
"""

import functools
import sys

from kolo import _kolo
from kolo.common import basics as _b
from kolo.common.exceptions import (UNAVAILABLE, HorovodInternalError,
                                    HostsUpdatedInterrupt, translate)

# How long one wait for the next epoch (or a rejoin) may take, seconds.
EPOCH_TIMEOUT = 120.0


class State:
    """State of a training job that run_fn keeps consistent across
    membership changes. Subclasses define save, restore and sync.

    ``bcast_object(obj, root_rank=0)`` sends rank 0's object to every rank;
    ``get_rank()`` is this worker's rank."""

    def __init__(self, bcast_object, get_rank):
        self._bcast_object = bcast_object
        self._rank = get_rank
        self._reset_callbacks = []
        self._commits = 0

    def register_reset_callbacks(self, callbacks):
        """Functions run after every membership change, before the state is
        synchronised (rescale a learning rate, rebuild a data loader)."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        """Runs reset(), then the reset callbacks (run_fn calls it after a
        membership change)."""
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def on_hosts_updated(self, timestamp, update_res):
        """Horovod's driver notification. kolo learns of membership changes
        at the membership check itself (``check_host_updates``), so there is
        nothing to queue."""

    def commit(self):
        """Saves the state (the point a rollback returns to), then checks for
        membership changes: ``HostsUpdatedInterrupt`` when workers join or
        leave here (let it propagate to run_fn)."""
        self.save()
        self._commits += 1
        _kolo.note_commit(self._commits)
        self.check_host_updates()

    def check_host_updates(self):
        """One round through the coordinator at which every member learns of
        joins and leaves; every rank must call it at the same point. Raises
        ``HostsUpdatedInterrupt`` when the membership changes here."""
        try:
            _kolo.check_host_updates()
        except _kolo.Error as e:
            raise translate(e) from None

    def save(self):
        """Keeps a copy of the state: the point restore() returns to."""
        raise NotImplementedError()

    def restore(self):
        """Puts the copy save() kept back."""
        raise NotImplementedError()

    def sync(self):
        """Makes every rank hold rank 0's state."""
        raise NotImplementedError()

    def reset(self):
        """Called after a membership change, before the reset callbacks."""


class ObjectState(State):
    """State made of plain Python objects given as keyword arguments; each
    becomes an attribute. save() copies the attributes' current values (by
    reference: assign new objects rather than mutating them in place),
    restore() sets them back, sync() broadcasts rank 0's saved values."""

    def __init__(self, bcast_object, get_rank, **kwargs):
        self._saved_state = kwargs
        self._set_attrs()
        super().__init__(bcast_object=bcast_object, get_rank=get_rank)

    def save(self):
        self._saved_state = {attr: getattr(self, attr)
                             for attr in self._saved_state}

    def restore(self):
        self._set_attrs()

    def sync(self):
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state)
            self._set_attrs()

    def _set_attrs(self):
        for attr, value in self._saved_state.items():
            setattr(self, attr, value)


def _await(call):
    try:
        call(EPOCH_TIMEOUT)
    except _kolo.Error as e:
        raise translate(e) from None


def _next_epoch():
    """After a membership change: waits for the next epoch (or, when this
    worker was evicted meanwhile, rejoins) and refreshes what the Python
    layer keeps per epoch (the global process set, the handle maps)."""
    try:
        _await(_kolo.await_next_epoch)
    except HorovodInternalError as e:
        if getattr(e, 'kolo_membership', '') != 'evicted':
            raise
        _rejoin(e)
        return
    _b._epoch_changed()


def _rejoin(evicted):
    print(f'kolo: worker {_kolo.worker_id()} was evicted ({evicted}); '
          'rejoining as a newcomer', file=sys.stderr, flush=True)
    _await(_kolo.rejoin)
    _b._epoch_changed()


def _leave():
    print(f'kolo: worker {_kolo.worker_id()} leaves the job (asked to: '
          'SIGTERM)', file=sys.stderr, flush=True)
    _b.shutdown()
    sys.exit(0)


def _reconnect(lost):
    """The standalone coordinator was lost: restarted at its address within
    the lease, it forms the job again from the workers that reconnect.
    Raises HorovodInternalError naming ``lost`` when it does not come
    back."""
    window = _kolo.coordinator_reconnect_window()
    print(f'kolo: worker {_kolo.worker_id()} lost the coordinator ({lost}); '
          f'reconnecting for up to {window:g} s (KOLO_LEASE_SECONDS and a '
          'grace)',
          file=sys.stderr, flush=True)
    try:
        _kolo.rejoin(window)
    except _kolo.Error as e:
        raise HorovodInternalError(
            f'{lost}; the coordinator did not come back: {e}') from None
    print(f'kolo: worker {_kolo.worker_id()} is back: the coordinator '
          'restarted', file=sys.stderr, flush=True)
    _b._epoch_changed()


def _verdict_after_broken_link(error):
    """An op failed because the link to the coordinator broke: after a
    partition that healed, the eviction arrives just behind it. Returns the
    eviction, or ``error`` when none comes within the lease."""
    try:
        _kolo.await_session_verdict()
    except _kolo.Error as e:
        verdict = translate(e)
        if getattr(verdict, 'kolo_membership', '') == 'evicted':
            return verdict
    return error


def run_fn(func, reset=_next_epoch):
    """Wraps ``func(state, *args, **kwargs)`` in the elastic retry loop (see
    the module's docstring). ``reset`` moves the job to the next epoch."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        skip_sync = False
        while True:
            try:
                if not skip_sync:
                    state.sync()
                return func(state, *args, **kwargs)
            except HorovodInternalError as e:
                error = e
                if getattr(e, 'kolo_code', None) == UNAVAILABLE and \
                        _kolo.is_elastic_job():
                    error = _verdict_after_broken_link(e)
                kind = getattr(error, 'kolo_membership', '')
                if (getattr(error, 'kolo_code', None) == UNAVAILABLE and
                        kind == '' and
                        _kolo.coordinator_reconnect_window() > 0):
                    # Back to the last commit; the new epoch's sync makes
                    # every worker's state rank 0's.
                    state.restore()
                    _kolo.note_rollback(getattr(state, '_commits', 0))
                    _reconnect(error)
                    state.on_reset()
                    skip_sync = False
                    continue
                if kind == 'evicted':
                    # Back to the last commit first: what it did after it
                    # (in a timeline the others rolled back) must not reach
                    # the merge of progress at the next sync.
                    state.restore()
                    _rejoin(error)
                    state.on_reset()
                    skip_sync = False
                    continue
                if kind != 'lost':
                    raise
                state.restore()
                _kolo.note_rollback(getattr(state, '_commits', 0))
                skip_sync = False
            except HostsUpdatedInterrupt as e:
                if getattr(e, 'kolo_membership', '') == 'leaving':
                    _leave()
                skip_sync = e.skip_sync
            if _kolo.leave_requested():
                # Asked to leave after this worker's last membership check
                # (the epoch ended without it among the leavers): it leaves
                # now rather than wait for the next epoch.
                _leave()
            reset()
            state.on_reset()

    return wrapper
