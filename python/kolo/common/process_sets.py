"""Process sets, as horovod.common.process_sets: ``ProcessSet``,
``global_process_set``, ``add_process_set`` and ``remove_process_set``.

A ProcessSet is a sorted list of global ranks and, once registered with
kolo, an id (0 is every rank). Sets given to ``init(process_sets=...)`` are
registered at init in order; ``add_process_set`` / ``remove_process_set``
work at any time after init (as HOROVOD_DYNAMIC_PROCESS_SETS=1 in Horovod),
called identically on every rank. ``==`` compares identity, as in Horovod.

Thread-safety: registration is meant for the main thread (every rank must
call it in the same order anyway); reads are plain attribute reads.
"""

from kolo import _kolo
from kolo.common.exceptions import NOT_INITIALIZED, translate


class ProcessSet:
    """Some ranks that run collectives among themselves.

    ``process_set_id`` is None until the set is registered; ``ranks`` is the
    sorted list of global ranks; ``mpi_comm`` is always None (kolo has no MPI).
    """

    def __init__(self, ranks_or_comm):
        self.process_set_id = None
        self.mpi_comm = None
        if not isinstance(ranks_or_comm, (list, tuple, range)):
            raise ValueError(
                'ProcessSet takes a list of ranks (kolo has no MPI '
                f'communicators), got {type(ranks_or_comm).__name__}')
        ranks = list(ranks_or_comm)
        for r in ranks:
            if not isinstance(r, int) or isinstance(r, bool):
                raise ValueError(
                    f'ProcessSet ranks must be ints, got {r!r} in {ranks}')
        self.ranks = sorted(ranks)

    def _invalidate(self):
        self.process_set_id = None

    def size(self):
        """The number of ranks in the set; None before it is registered."""
        if self.process_set_id is None:
            return None
        return len(self.ranks)

    def rank(self):
        """This process's rank within the set; -1 if it is not a member;
        None before registration."""
        if self.process_set_id is None:
            return None
        me = _kolo.rank()
        return self.ranks.index(me) if me in self.ranks else -1

    def included(self):
        """Whether this process is a member; None before registration."""
        if self.process_set_id is None:
            return None
        return _kolo.rank() in self.ranks

    def __str__(self):
        return (f'ProcessSet(process_set_id={self.process_set_id}, '
                f'ranks={self.ranks}, mpi_comm={self.mpi_comm})')

    __repr__ = __str__


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0

# id -> ProcessSet, for the sets registered in this init (0 included).
_registered = {}


def _check_initialized():
    if not _kolo.is_initialized():
        raise ValueError(NOT_INITIALIZED)


def _register(ps):
    """Registers `ps` with kolo (every rank alike) and sets its id."""
    try:
        ps.process_set_id = _kolo.add_process_set(ps.ranks)
    except _kolo.Error as e:
        raise translate(e) from None
    _registered[ps.process_set_id] = ps
    return ps


def _setup(process_sets):
    """At init: fill in the global set and register `process_sets`."""
    global_process_set.ranks = list(range(_kolo.size()))
    global_process_set.process_set_id = 0
    _registered.clear()
    _registered[0] = global_process_set
    for ps in process_sets:
        _register(ps)


def _teardown():
    """At shutdown: every set but the global one loses its id."""
    for ps in list(_registered.values()):
        if ps is not global_process_set:
            ps._invalidate()
    _registered.clear()


def add_process_set(process_set):
    """Registers a ProcessSet (or a list of ranks) and returns the
    ProcessSet. Call it identically on every rank. A set of the same ranks
    as one registered → ValueError."""
    _check_initialized()
    ps = process_set if isinstance(process_set, ProcessSet) else ProcessSet(
        process_set)
    for other in _registered.values():
        if other is ps or (other is not global_process_set and
                           other.ranks == ps.ranks):
            raise ValueError(f'Attempted to add a duplicate process set: {ps}')
    return _register(ps)


def remove_process_set(process_set):
    """Removes a registered set (identically on every rank); its id becomes
    None. Returns False for the global set or an unregistered one."""
    _check_initialized()
    if process_set.process_set_id in (None, 0):
        return False
    try:
        _kolo.remove_process_set(process_set.process_set_id)
    except _kolo.Error as e:
        raise translate(e) from None
    _registered.pop(process_set.process_set_id, None)
    process_set._invalidate()
    return True


def _id_of(process_set):
    """The kolo id of `process_set` for a submission (ValueError if it is not
    registered)."""
    ps_id = process_set.process_set_id
    if ps_id is None:
        raise ValueError(
            f'{process_set} is not registered (add_process_set() it, or it '
            'was removed or dropped at shutdown)')
    return ps_id
