"""Start, stop and topology, as horovod.common.basics: ``init``,
``shutdown``, ``is_initialized``, the rank/size getters, the build and
runtime flags, the reduce-op constants and the dynamic timeline.

``init()`` joins the job kolorun (or torchrun, Slurm, Open MPI) describes in
the environment; it may be called again after ``shutdown()``, many times in
one process. The build flags may be called before ``init()``.

Thread-safety: init/shutdown are meant for the main thread (kolo serialises
them); getters are lock-free.
"""

import atexit
import os
import warnings

from kolo import _kolo
from kolo.common import process_sets as _ps
from kolo.common import torchrun as _torchrun
from kolo.common.exceptions import NOT_INITIALIZED, translate

# Reduce ops: plain ints, Horovod's values.
Average = 0
Sum = 1
Adasum = 2
Min = 3
Max = 4
Product = 5

# Horovod op -> kolo op code (kolo._kolo.REDUCE_OPS order).
_KOLO_OP = {
    Sum: _kolo.REDUCE_OPS.index('sum'),
    Min: _kolo.REDUCE_OPS.index('min'),
    Max: _kolo.REDUCE_OPS.index('max'),
    Product: _kolo.REDUCE_OPS.index('product'),
}

_OP_NAMES = {Average: 'Average', Sum: 'Sum', Adasum: 'Adasum', Min: 'Min',
             Max: 'Max', Product: 'Product'}

_atexit_registered = False
_init_hooks = []      # run at every init() (the handle maps)
_shutdown_hooks = []  # run after every shutdown() stopped kolo's thread
_epoch_hooks = []     # run when an elastic job moved to its next epoch


def _on_init(hook):
    _init_hooks.append(hook)


def _on_shutdown(hook):
    _shutdown_hooks.append(hook)


def _on_epoch_change(hook):
    """``hook()`` runs each time an elastic job moves to its next epoch
    (kolo.common.elastic), after the new rank and size are known. A hook
    that returns False is dropped (an object it served is gone)."""
    _epoch_hooks.append(hook)


def _epoch_changed():
    """The job moved to its next epoch: the ended epoch's ops are over (its
    runtime stopped), so the handle maps are emptied, the global process set
    gets the new size and other sets lose their ids (as at Horovod's
    shutdown() + init()); then the hooks run."""
    _ps._teardown()
    _ps._setup([])
    for hook in list(_shutdown_hooks):
        hook()
    for hook in list(_epoch_hooks):
        if hook() is False:
            _epoch_hooks.remove(hook)


def init(comm=None, process_sets=None):
    """Joins the job (a no-op if already initialised, but the handle maps are
    emptied, as in Horovod). ``process_sets``: ProcessSets to register now
    (every rank the same), or ``"dynamic"``."""
    global _atexit_registered
    if comm is not None:
        raise ValueError(
            'kolo: init(comm=...) takes MPI communicators, and kolo has no '
            'MPI; launch with kolorun and use process_sets= for subsets')
    if process_sets is None or process_sets == 'dynamic':
        sets = []
    else:
        sets = list(process_sets)
        for i, ps in enumerate(sets):
            if not isinstance(ps, _ps.ProcessSet):
                raise ValueError(
                    f'process_sets entry number {i} is not a ProcessSet: {ps!r}')
            for earlier in sets[:i]:
                if earlier is ps or earlier.ranks == ps.ranks:
                    raise ValueError(
                        'Horovod could not be initialized because '
                        f'process_sets entry number {i} is a duplicate: {ps}')
    for hook in _init_hooks:
        hook()
    if not _atexit_registered:
        atexit.register(_shutdown_at_exit)
        _atexit_registered = True
    if _kolo.is_initialized():
        return
    try:
        # Under torchrun: the coordinator's port and the secret through
        # torchrun's store, unless the user set them.
        _torchrun.prepare()
    except _torchrun.TorchrunStoreError as e:
        raise ValueError(f'Horovod initialization failed. {e}') from None
    try:
        _kolo.init([])
    except _kolo.Error as e:
        raise ValueError(f'Horovod initialization failed. {e.args[1]}') from None
    finally:
        # kolo removed the job secret from the C environment (and keeps it
        # for a later init); Python's copy goes too, or subprocess and
        # os.environ would still hand it on.
        os.environ.pop('KOLO_SECRET', None)
    try:
        _ps._setup(sets)
    except Exception:
        shutdown()
        raise


def _shutdown_at_exit():
    if _kolo.is_initialized():
        try:
            shutdown()
        except Exception:  # pylint: disable=broad-except
            pass  # kolo logged what was pending


def shutdown():
    """Leaves the job. Ops still pending end with an error; the handle maps
    are emptied; sets other than the global one lose their ids. A no-op when
    not initialised."""
    _ps._teardown()
    try:
        _kolo.shutdown()
    except _kolo.Error as e:
        # Ops left pending ended with an error (kolo named them in its log);
        # as Horovod, shutdown returns.
        warnings.warn(f'kolo shutdown: {e.args[1]}', RuntimeWarning)
    finally:
        # Only now: kolo's thread no longer writes into their tensors.
        for hook in _shutdown_hooks:
            hook()


def is_initialized():
    """True between a successful init() and the next shutdown()."""
    return _kolo.is_initialized()


def _getter(fn):
    def get():
        value = fn()
        if value < 0:
            raise ValueError(NOT_INITIALIZED)
        return value

    get.__name__ = fn.__name__
    get.__doc__ = f'{fn.__name__}() of the current job; ValueError before init().'
    return get


size = _getter(_kolo.size)
rank = _getter(_kolo.rank)
local_size = _getter(_kolo.local_size)
local_rank = _getter(_kolo.local_rank)
cross_size = _getter(_kolo.cross_size)
cross_rank = _getter(_kolo.cross_rank)


def is_homogeneous():
    """True when every host runs the same number of ranks."""
    return size() == local_size() * cross_size()


# ---- Build and runtime flags (callable before init) ----------------------

def mpi_built():
    """False: kolo has no MPI."""
    return False


def gloo_built():
    """True: kolo's TCP / shared-memory data plane is a Gloo-class CPU
    backend."""
    return True


def nccl_built():
    """The NCCL version that reduces CUDA tensors (NCCL_VERSION_CODE form,
    22809 for 2.28.9), or 0 when kolo was built without NCCL."""
    return _kolo.nccl_version()


def ddl_built():
    """False: kolo has no IBM DDL."""
    return False


def ccl_built():
    """False: kolo has no oneCCL."""
    return False


def cuda_built():
    """Whether kolo was built with CUDA (CUDA tensors accepted by every op;
    on a process that cannot use a device, an op on one fails saying
    why)."""
    return _kolo.cuda_built()


def rocm_built():
    """False: kolo has no ROCm support."""
    return False


def mpi_enabled():
    """False: kolo has no MPI."""
    return False


def gloo_enabled():
    """True: kolo's own data plane is always on (see gloo_built())."""
    return True


def mpi_threads_supported():
    """Raises ValueError, as Horovod does when MPI is not enabled."""
    raise ValueError("Horovod MPI is not enabled; Please make sure it's "
                     'installed and enabled.')


# ---- Timeline -------------------------------------------------------------

def start_timeline(file_path, mark_cycles=False):
    """Starts writing a timeline to `file_path` (rank 0 writes it). Needs
    HOROVOD_TIMELINE=DYNAMIC (or KOLO_TIMELINE=DYNAMIC) at start."""
    if not _kolo.is_initialized():
        raise ValueError(NOT_INITIALIZED)
    if _timeline_mode() != 'DYNAMIC':
        raise ValueError(
            'Set HOROVOD_TIMELINE=DYNAMIC to enable dynamic timeline usage.')
    try:
        _kolo.start_timeline(str(file_path), bool(mark_cycles))
    except _kolo.Error as e:
        raise translate(e) from None


def stop_timeline():
    """Stops and closes the timeline started by start_timeline()."""
    if not _kolo.is_initialized():
        raise ValueError(NOT_INITIALIZED)
    try:
        _kolo.stop_timeline()
    except _kolo.Error as e:
        raise translate(e) from None


def _timeline_mode():
    return os.environ.get('KOLO_TIMELINE',
                          os.environ.get('HOROVOD_TIMELINE', ''))
