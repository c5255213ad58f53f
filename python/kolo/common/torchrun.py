"""What a torchrun launch lacks, taken from torchrun's own store.

torchrun (torch.distributed.run) gives its workers RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT, but kolo needs two things more: a port for its
coordinator (MASTER_PORT belongs to torchrun: under its default static
rendezvous, TORCHELASTIC_USE_AGENT_STORE=True, torchrun's agent keeps its own
store there; under the others it is left for the workers' own
torch.distributed store) and the job secret. ``prepare()`` fills in, for
this process, whichever of KOLO_COORDINATOR and the secret (KOLO_SECRET or
KOLO_SECRET_FILE) the user did not set:

- rank 0 picks a free port on its host, MASTER_ADDR (torch 1.13 puts global
  rank 0 on node 0, and MASTER_ADDR names node 0: under the static
  rendezvous the --master_addr where node 0's agent hosts the store, else
  node 0's host name) and draws a secret, and publishes those the job lacks in the store under
  keys named by TORCHELASTIC_RUN_ID and TORCHELASTIC_RESTART_COUNT (a
  restarted attempt never reads the last attempt's values);
- the other ranks read them, waiting at most the start timeout
  (KOLO_START_TIMEOUT or HOROVOD_START_TIMEOUT, 30 s by default).

The store is torchrun's agent store under the static rendezvous; under the
others rank 0 hosts one on MASTER_PORT (as torch.distributed's env://
initialisation does) only until every rank has read, so a later
init_process_group finds the port free again. A job of one worker needs no
store. The secret passes through the store: anything that can reach
MASTER_PORT can read it; a user's KOLO_COORDINATOR and KOLO_SECRET_FILE take
precedence and keep it out.

Thread-safety: for init() only, on the main thread (it sets os.environ);
what one launch attempt learnt is kept for a later init() of the process.
"""

import datetime
import ipaddress
import os
import secrets
import socket
import threading
import time

_lock = threading.Lock()
_learnt = {}  # (run id, restart count) -> {variable: value} it set

_DEFAULT_START_TIMEOUT = 30.0


class TorchrunStoreError(RuntimeError):
    """torchrun's store could not give this worker what kolo needs."""


def launched_by_torchrun(env):
    """True when torchrun (its elastic agent) started this process and kolorun
    did not (kolorun's variables win, as in the worker library)."""
    if env.get('KOLO_LAUNCHER'):
        return False
    if not (env.get('TORCHELASTIC_RUN_ID') or
            env.get('TORCHELASTIC_USE_AGENT_STORE')):
        return False
    return all(env.get(v) for v in ('RANK', 'WORLD_SIZE', 'MASTER_ADDR',
                                    'MASTER_PORT'))


def start_timeout(env):
    """The start timeout in seconds, as the worker library reads it."""
    for name in ('KOLO_START_TIMEOUT', 'HOROVOD_START_TIMEOUT'):
        value = env.get(name)
        if value:
            try:
                seconds = float(value)
            except ValueError:
                raise TorchrunStoreError(
                    f'{name}={value!r} is not a number of seconds') from None
            if 0 < seconds <= 1e7:
                return seconds
            raise TorchrunStoreError(
                f'{name}={value!r} is not between 0 and 10000000 seconds')
    return _DEFAULT_START_TIMEOUT


def prepare(env=None):
    """Sets KOLO_COORDINATOR and/or KOLO_SECRET in ``env`` (os.environ by
    default) for a torchrun launch that lacks them; does nothing otherwise.
    Raises TorchrunStoreError when the store does not answer in time."""
    env = os.environ if env is None else env
    if not launched_by_torchrun(env):
        return
    attempt = (env.get('TORCHELASTIC_RUN_ID', ''),
               env.get('TORCHELASTIC_RESTART_COUNT', '0'))
    with _lock:
        learnt = _learnt.get(attempt)
        if learnt is None:
            # Decided once per attempt: init() removes KOLO_SECRET from the
            # environment, and a later init() must not mistake the user's
            # secret for a missing one.
            need_coordinator = not env.get('KOLO_COORDINATOR')
            need_secret = not (env.get('KOLO_SECRET') or
                               env.get('KOLO_SECRET_FILE'))
            learnt = {}
            if need_coordinator or need_secret:
                learnt = _learn(env, need_coordinator, need_secret, attempt)
            _learnt[attempt] = learnt
    env.update(learnt)


def _learn(env, need_coordinator, need_secret, attempt):
    rank = int(env['RANK'])
    size = int(env['WORLD_SIZE'])
    if size == 1:
        # Nobody else must find this worker: any port, any secret.
        alone = {}
        if need_coordinator:
            alone['KOLO_COORDINATOR'] = '127.0.0.1:0'
        if need_secret:
            alone['KOLO_SECRET'] = secrets.token_hex(32)
        return alone
    try:
        # pylint: disable=import-outside-toplevel
        from torch.distributed import TCPStore
    except ImportError:
        return {}  # the worker library says what to set instead
    host, port = env['MASTER_ADDR'], int(env['MASTER_PORT'])
    timeout = start_timeout(env)
    deadline = time.monotonic() + timeout
    agent_store = env.get('TORCHELASTIC_USE_AGENT_STORE') == 'True'
    hosts = not agent_store and rank == 0
    where = (f"torchrun's store at MASTER_ADDR:MASTER_PORT={host}:{port}"
             if agent_store else
             f'the store rank 0 hosts at MASTER_ADDR:MASTER_PORT={host}:{port}')
    what = ' and '.join(
        w for w, needed in (("kolo's coordinator address", need_coordinator),
                            ('the job secret', need_secret)) if needed)
    try:
        store = TCPStore(host, port, size, hosts,
                         datetime.timedelta(seconds=timeout),
                         wait_for_workers=False)
    except (RuntimeError, OSError) as e:
        raise TorchrunStoreError(
            f'rank {rank} could not {"open" if hosts else "reach"} {where} '
            f'within {timeout:g} s to learn {what} ({e}); set '
            'KOLO_COORDINATOR=<rank 0 host>:<free port> and KOLO_SECRET_FILE '
            'on every worker to start without it') from None
    # Only what this job lacks goes into the store (a secret the user gave
    # stays out of it); every rank sees the same variables.
    prefix = f'kolo/{attempt[0]}/{attempt[1]}/'
    keys = {}
    if need_coordinator:
        keys['KOLO_COORDINATOR'] = prefix + 'coordinator'
    if need_secret:
        keys['KOLO_SECRET'] = prefix + 'secret'
    if rank == 0:
        learnt = {}
        if need_coordinator:
            learnt['KOLO_COORDINATOR'] = _free_coordinator_address(host)
        if need_secret:
            learnt['KOLO_SECRET'] = secrets.token_hex(32)
        for name, key in keys.items():
            store.set(key, learnt[name])
        if hosts:
            _wait_for_readers(store, prefix + 'read', size - 1, deadline,
                              where, timeout)
        return learnt
    try:
        store.wait(list(keys.values()), datetime.timedelta(
            seconds=max(deadline - time.monotonic(), 0.001)))
        learnt = {name: store.get(key).decode() for name, key in keys.items()}
    except RuntimeError as e:
        raise TorchrunStoreError(
            f'rank {rank} waited {timeout:g} s in {where} for rank 0 to '
            f'publish {what} (key{"s" if len(keys) > 1 else ""} '
            f'{" and ".join(keys.values())}), in vain ({e}): rank 0 did not '
            'reach hvd.init() in time (raise KOLO_START_TIMEOUT if it starts '
            'slowly)') from None
    if not agent_store:
        store.add(prefix + 'read', 1)
    return learnt


def _wait_for_readers(store, key, readers, deadline, where, timeout):
    """Rank 0 keeps its store until every other rank has read from it."""
    while store.add(key, 0) < readers:
        if time.monotonic() > deadline:
            raise TorchrunStoreError(
                f'rank 0 waited {timeout:g} s for the {readers} other ranks '
                f'to read what kolo lacks from {where}; {store.add(key, 0)} '
                'did: the others did not reach '
                'hvd.init() in time (raise KOLO_START_TIMEOUT if they start '
                'slowly)')
        time.sleep(0.01)


def _free_coordinator_address(host):
    """host:port with a port free now on rank 0's host, bound where the
    coordinator will bind (the address itself if it is an IP, else all)."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    family = socket.AF_INET6 if ip is not None and ip.version == 6 \
        else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host if ip is not None else '0.0.0.0', 0))
        port = s.getsockname()[1]
    return f'[{host}]:{port}' if family == socket.AF_INET6 else f'{host}:{port}'
