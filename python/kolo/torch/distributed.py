"""torch.distributed on kolo: ``import kolo.torch.distributed`` registers the
c10d backend ``"kolo"``, so that ``dist.init_process_group("kolo")`` gives a
process group whose collectives run on kolo (the native half is
kolo._kolo_c10d, a ProcessGroupKolo; docs/pytorch.md lists the ops).

Starting: under kolorun, which sets none of torch's variables, the import
starts kolo (kolo.init()) and sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR
and MASTER_PORT (a port free on rank 0, at the address rank 0 reaches
kolo's coordinator from, both broadcast through kolo) for torch's env://
rendezvous, unless RANK is set already or the job is elastic (use
``reinit()`` there, see below). Elsewhere
(torchrun, env://, tcp://) the backend starts kolo from what torch gave it:
unless KOLO_COORDINATOR and a secret (KOLO_SECRET or KOLO_SECRET_FILE) are
set, rank 0 picks a free port on MASTER_ADDR (127.0.0.1 if unset) and draws
a secret, and every rank reads both from torch's store (readable by anything
that can reach it; set them yourself to keep the secret out). RANK and
WORLD_SIZE default to the group's. Torch's rank and size must then agree
with kolo's, else init_process_group raises RuntimeError.

Subgroups: ``dist.new_group(ranks, backend="kolo")`` runs on a kolo process
set of exactly those ranks, which must be registered on every rank first,
since kolo negotiates sets over all ranks and torch calls the backend only
on the group's members. ``new_group(ranks)`` here does both. A group of
every rank runs on the global set.

Elastic jobs (docs/pytorch.md, "Elastic DDP"): when the job's epoch ends (a
worker lost, joined or left), every pending collective of a kolo group
fails with a RuntimeError naming the membership change ("kolo membership
change (lost)", and the tag "[kolo membership=KIND code=N]" that
kolo.torch.elastic.run turns back into kolo's membership error). A group
belongs to the epoch it was made in: inside the elastic loop, ``reinit()``
destroys the default group and makes the current epoch's (new rank and
size, a fresh rendezvous through kolo), after which DDP is wrapped again.

Thread-safety: the creator runs where torch calls it (init_process_group,
new_group: the main thread); the per-set group counter is guarded by _lock.
"""

import os
import secrets
import socket
import threading
from datetime import timedelta

import torch.distributed as dist

from kolo import _kolo
from kolo.common import basics as _basics
from kolo.common import process_sets as _ps
from kolo.common import torchrun as _torchrun
from kolo.torch.epoch_store import EpochStore

def _import_backend():
    """kolo._kolo_c10d, or an ImportError that says why it is missing."""
    # pylint: disable=import-outside-toplevel
    import torch
    from kolo._version import c10d_torch_version as built_for
    if not built_for:
        raise ImportError(
            'kolo.torch.distributed: this kolo was built without its '
            'torch.distributed backend (kolo._kolo_c10d): build kolo with '
            "Torch's C++ package installed (apt-get install -y libtorch-dev)")
    have = torch.__version__.split('+')[0]
    if have.split('.')[:2] != built_for.split('.')[:2]:
        raise ImportError(
            f"kolo.torch.distributed: kolo's torch.distributed backend was "
            f'built for torch {built_for}, and this is torch {have} '
            f'({torch.__file__}): install kolo built against this torch, or '
            f'the torch it was built for')
    try:
        from kolo import _kolo_c10d as backend
    except ImportError as e:
        raise ImportError(
            "kolo.torch.distributed: kolo's torch.distributed backend "
            f'(kolo._kolo_c10d, built for torch {built_for}) is not installed '
            'or does not load: with the Debian packages, apt-get install '
            f'kolo-torch ({e})') from None
    return backend


_kolo_c10d = _import_backend()

BACKEND = 'kolo'

_lock = threading.Lock()
_groups_per_set = {}  # kolo process set id -> groups created on it here
# Prefix of the groups' uids, the same on every rank: "" until reinit(),
# then a token rank 0 drew for the epoch, so that the names of a new epoch's
# collectives never meet a stale group's.
_uid_prefix = ''


def _start_kolo(store, rank, size):
    """kolo.init() for a default group, its coordinator and secret through
    torch's store when no launcher gave them."""
    env = os.environ
    if not env.get('KOLO_LAUNCHER') and not _torchrun.launched_by_torchrun(env):
        env.setdefault('RANK', str(rank))
        env.setdefault('WORLD_SIZE', str(size))
    need_coordinator = not (env.get('KOLO_LAUNCHER') or
                            env.get('KOLO_COORDINATOR'))
    need_secret = not (env.get('KOLO_LAUNCHER') or env.get('KOLO_SECRET') or
                       env.get('KOLO_SECRET_FILE'))
    if rank == 0:
        if need_coordinator:
            host = env.get('MASTER_ADDR', '127.0.0.1')
            store.set('kolo/coordinator',
                      _torchrun._free_coordinator_address(host))
        if need_secret:
            store.set('kolo/secret', secrets.token_hex(32))
    if need_coordinator:
        env['KOLO_COORDINATOR'] = store.get('kolo/coordinator').decode()
    if need_secret:
        env['KOLO_SECRET'] = store.get('kolo/secret').decode()
    try:
        _basics.init()
    except ValueError as e:
        raise RuntimeError(f'kolo backend: kolo.init() failed: {e}') from None


def _local_address():
    """The address this host reaches kolo's coordinator from (127.0.0.1 when
    it runs here)."""
    host = os.environ.get('KOLO_COORDINATOR', '127.0.0.1:1').rsplit(':', 1)[0]
    host = host.strip('[]') or '127.0.0.1'
    try:
        family = socket.AF_INET6 if ':' in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect((host, 1))
            return s.getsockname()[0]
    except OSError:
        return '127.0.0.1'


def _kolorun_env():
    """Under kolorun without RANK: starts kolo and sets torch's env://
    variables from it."""
    env = os.environ
    if env.get('KOLO_LAUNCHER') != 'kolorun' or env.get('RANK'):
        return
    # pylint: disable=import-outside-toplevel
    from kolo.torch.functions import broadcast_object
    try:
        _basics.init()
    except ValueError as e:
        raise RuntimeError(f'kolo.torch.distributed: kolo.init() failed: {e}') \
            from None
    if _kolo.is_elastic_job():
        # Its ranks change with the epochs, and a newcomer imports this
        # while the others train: reinit() makes each epoch's group.
        return
    where = None
    if _kolo.rank() == 0:
        host = _local_address()
        where = _torchrun._free_coordinator_address(host).rsplit(':', 1)
        where[0] = where[0].strip('[]')
    host, port = broadcast_object(where, root_rank=0,
                                  name='kolo.torch.distributed.rendezvous')
    env['RANK'] = str(_kolo.rank())
    env['WORLD_SIZE'] = str(_kolo.size())
    env['LOCAL_RANK'] = str(_kolo.local_rank())
    env.setdefault('MASTER_ADDR', host)
    env.setdefault('MASTER_PORT', port)


def _set_of(ranks):
    """The kolo process set of exactly ``ranks`` (0 for every rank)."""
    if ranks == list(range(_kolo.size())):
        return 0
    for ps in _kolo.process_sets():
        if ps and list(_kolo.process_set_ranks(ps)) == ranks:
            return ps
    raise RuntimeError(
        f'kolo backend: no kolo process set holds exactly ranks {ranks}: '
        'register it on every rank first (kolo.torch.add_process_set(ranks)), '
        'or make the group with kolo.torch.distributed.new_group(ranks), '
        'which does both (torch creates the backend on the members only, '
        'and kolo registers sets over every rank)')


def _create(opts, _pg_options):
    """torch's creator (extended API): a ProcessGroupKolo for the default
    group or a subgroup."""
    ranks = sorted(opts.global_ranks_in_group)
    if not ranks:  # the default group
        if not _kolo.is_initialized():
            _start_kolo(opts.store, opts.group_rank, opts.group_size)
        if (_kolo.rank(), _kolo.size()) != (opts.group_rank, opts.group_size):
            raise RuntimeError(
                f'kolo backend: torch says rank {opts.group_rank} of '
                f'{opts.group_size}, kolo says rank {_kolo.rank()} of '
                f'{_kolo.size()}: start both from the same launcher (kolorun '
                'sets RANK/WORLD_SIZE for torch; under torchrun kolo reads '
                "torchrun's)")
        ranks = list(range(opts.group_size))
    elif not _kolo.is_initialized():
        raise RuntimeError('kolo backend: a subgroup before the default group')
    process_set = _set_of(ranks)
    with _lock:
        n = _groups_per_set.get(process_set, 0)
        _groups_per_set[process_set] = n + 1
        uid = f'{_uid_prefix}{process_set}.{n}'
    return _kolo_c10d.create(opts.group_rank, opts.group_size, process_set,
                             uid, opts.timeout)


def new_group(ranks=None, timeout=timedelta(minutes=30), pg_options=None):
    """dist.new_group on the kolo backend: registers the kolo process set of
    ``ranks`` (every rank must call it, as torch requires) unless one exists,
    then makes the group. ``ranks=None``: every rank."""
    if ranks is not None:
        ranks = sorted(ranks)
        if ranks != list(range(_kolo.size())):
            try:
                _set_of(ranks)
            except RuntimeError:
                _ps.add_process_set(ranks)
    return dist.new_group(ranks, timeout=timeout, backend=BACKEND,
                          pg_options=pg_options)


def reinit(timeout=timedelta(minutes=30)):
    """Makes the default process group of kolo's current epoch and returns
    it (``dist.group.WORLD``): destroys the existing default group (and
    every subgroup) if there is one, then ``init_process_group("kolo")``
    with kolo's rank and size, through an EpochStore (kolo.torch.epoch_store:
    its operations are kolo collectives, so no rank serves it and a member
    lost meanwhile raises kolo's membership error). Every rank of the epoch
    calls it at the same point: in an elastic job, first thing in the
    function that ``kolo.torch.elastic.run`` wraps (it runs again after
    each membership change, on survivors and newcomers alike); then wrap
    the model in DDP again. ``timeout``: the group's (torch's default, 30
    minutes): the rendezvous's, and each collective's from its call (one
    not complete by then raises RuntimeError and makes the group unusable;
    a member lost shows sooner, as kolo's membership error)."""
    global _uid_prefix
    # pylint: disable=import-outside-toplevel
    from kolo.torch.functions import broadcast_object
    if not _kolo.is_initialized():
        try:
            _basics.init()
        except ValueError as e:
            raise RuntimeError(
                f'kolo.torch.distributed.reinit: kolo.init() failed: {e}') \
                from None
    if dist.is_initialized():
        dist.destroy_process_group()
    token = broadcast_object(
        secrets.token_hex(6) if _kolo.rank() == 0 else None, root_rank=0,
        name='kolo.torch.distributed.reinit')
    with _lock:
        _groups_per_set.clear()
        _uid_prefix = f'{token}.'
    # The store's operations are kolo collectives over this epoch's ranks:
    # a member lost meanwhile makes them raise kolo's membership error.
    dist.init_process_group(BACKEND, store=EpochStore(token),
                            rank=_kolo.rank(), world_size=_kolo.size(),
                            timeout=timeout)
    return dist.group.WORLD


_kolorun_env()
if BACKEND.upper() not in dist.Backend._plugins:  # pylint: disable=protected-access
    dist.Backend.register_backend(BACKEND, _create, extended_api=True)
