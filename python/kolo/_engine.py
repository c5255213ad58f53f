"""The framework-neutral core of kolo's Python collectives: op and scale
resolution (Horovod's semantics), names, local argument checks, the handle
map, poll and synchronize. kolo.torch.mpi_ops and kolo.numpy describe their
arrays to it through an adapter (see ``Adapter``) and get Horovod's return
values back.

Horovod's scaling, bit for bit: Average is submitted as a Sum whose
postscale is divided by the set size, so that the result is
``postscale/size * sum(prescale * x)`` with the factor applied per element
as Horovod does (double for integers and float64, float for float32,
float then rounded for float16) -- kolo's kernels apply the factors that way.

Handle map: handle -> (objects kept alive, finisher, needs the native
result?), or, for an in-place allreduce of a host tensor (the hot path of a
training step), the tensor itself, which synchronize() returns. A device
tensor is described by a pointer object (kolo._kolo.DevicePointer) that
holds its ready event: the entry keeps those objects too, so that the event
outlives the op. An entry exists from
submission until synchronize(); it keeps the inputs and outputs alive while
kolo's thread uses their memory. The native module shares the map
(set_handle_map): kolo.torch's allreduce_async_ adds its entries there, and
synchronize_fast completes and removes those that are outputs, in C. init()
again empties the map (as Horovod) but keeps the entries' objects alive
until shutdown() has stopped kolo's thread, which is when shutdown() drops
everything.

Thread-safety: submissions and synchronize may be called from any thread
(dict operations are atomic under the GIL); as with Horovod, a handle is
synchronized by one thread.
"""

import warnings

from kolo import _kolo
from kolo.common import basics as _b
from kolo.common import process_sets as _ps
from kolo.common.exceptions import (HorovodInternalError, NOT_INITIALIZED,
                                    translate)

_handles = {}
# Entries dropped from _handles by init() while kolo may still use their
# memory: kept alive until shutdown() has stopped kolo's thread.
_orphans = []


def _drop_handles():
    """init() again: Horovod empties the handle map. The tensors stay alive
    (an op in flight still writes into them) until the next shutdown."""
    _orphans.extend(_handles.values())
    _handles.clear()


def _after_shutdown():
    """kolo stopped: nothing uses the tensors of dropped handles any more."""
    _handles.clear()
    _orphans.clear()


_b._on_init(_drop_handles)
_b._on_shutdown(_after_shutdown)

_SUM = _kolo.REDUCE_OPS.index('sum')
_wait_fast = _kolo.wait_fast
_synchronize_fast = _kolo.synchronize_fast
_kolo.set_handle_map(_handles)
BOOL = _kolo.DTYPES.index('bool')


class Adapter:
    """How one array library describes its arrays to the engine."""

    # (ptr, shape list, dtype code) of a contiguous array, or ValueError with
    # Horovod's messages. ptr: an int (host memory) or a
    # kolo._kolo.DevicePointer (device memory, with its ready event).
    def describe(self, tensor):
        raise NotImplementedError

    def empty_like(self, tensor, shape=None):
        raise NotImplementedError

    def clone(self, tensor):
        raise NotImplementedError

    # The output of an allgather/alltoall: a buffer (or None) and a shape.
    def from_buffer(self, buf, shape, like):
        raise NotImplementedError

    def int32_vector(self, values):
        raise NotImplementedError

    # Splits given as a tensor/array: (1-D?, int32?, values).
    def splits_info(self, splits):
        raise NotImplementedError


def call(fn, *args):
    """Calls the native `fn`, turning its errors into Horovod's classes."""
    try:
        return fn(*args)
    except _kolo.Error as e:
        raise translate(e, not_initialized=not _kolo.is_initialized()) from None


def name_of(kind, name):
    """Horovod prefixes names by the op type; '' lets kolo number an unnamed
    op ("<kind>.noname.<N>", restarting at every init)."""
    if name is None:
        return ''
    return f'{kind}.{name}'


def set_info(process_set):
    """(kolo id, size, this rank's index) of a registered set."""
    ps_id = _ps._id_of(process_set)
    if ps_id == 0:
        n = _kolo.size()
        return 0, n, _kolo.rank()
    ranks = process_set.ranks
    me = _kolo.rank()
    return ps_id, len(ranks), (ranks.index(me) if me in ranks else -1)


def resolve_op(op, average):
    if op is not None and average is not None:
        raise ValueError('The op parameter supersedes average. Please provide '
                         'only one of them.')
    if average is not None:
        warnings.warn('Parameter `average` has been replaced with `op` and '
                      'will be removed in v1.0', DeprecationWarning)
        return _b.Average if average else _b.Sum
    return _b.Average if op is None else op


def reduce_args(op, prescale, postscale, set_size, dtype):
    """kolo's (op code, prescale, postscale) for Horovod's `op`."""
    if op == _b.Adasum:
        if set_size > 1:
            raise NotImplementedError(
                'kolo: Adasum is not implemented (Horovod has no working '
                'Adasum path on Gloo either); use op=Average or op=Sum')
        op = _b.Sum  # Adasum over one rank is the identity
    if dtype == BOOL:
        if op == _b.Average:
            raise ValueError('kolo: op=Average is not defined for bool tensors; '
                             'use Sum (logical or) or Min (logical and)')
        if prescale != 1.0 or postscale != 1.0:
            raise ValueError('kolo: prescale/postscale factors apply to '
                             'numeric tensors, not to bool tensors')
    if op == _b.Average:
        return _SUM, float(prescale), float(postscale) / set_size
    code = _b._KOLO_OP.get(op)
    if code is None:
        raise ValueError(f'kolo: unknown reduce op {op!r}; use one of '
                         'Average, Sum, Min, Max, Product')
    return code, float(prescale), float(postscale)


def _require_init():
    if not _kolo.is_initialized():
        raise HorovodInternalError(NOT_INITIALIZED)


def register(handle, keep, finish, needs_result=True):
    """`finish(result)` makes synchronize's return value; without
    `needs_result` it gets None (the output is a tensor the caller gave)."""
    _handles[handle] = (keep, finish, needs_result)
    return handle


# ---- Submissions ------------------------------------------------------------

def allreduce_async(a, tensor, output, op, prescale, postscale, name,
                    process_set, kind='allreduce'):
    # The training step's hot path (one call per gradient): kept flat.
    ptr, shape, dtype = a.describe(tensor)
    out_ptr = ptr if output is tensor else a.describe(output)[0]
    if type(ptr) is not int:  # a device tensor: the general binding
        return _device_allreduce_async(a, tensor, output, ptr, out_ptr, shape,
                                       dtype, op, prescale, postscale, name,
                                       process_set, kind)
    if process_set is _ps.global_process_set:
        ps_id, n = 0, _kolo.size()
        if n < 0:
            raise HorovodInternalError(NOT_INITIALIZED)
    else:
        _require_init()
        ps_id, n, _ = set_info(process_set)
    if (op == _b.Average and dtype != BOOL and prescale == 1.0 and
            postscale == 1.0):
        kop, pre, post = _SUM, 1.0, 1.0 / n
    else:
        kop, pre, post = reduce_args(op, prescale, postscale, n, dtype)
    try:
        h = _kolo.allreduce_async_fast(ptr, out_ptr, shape, dtype, kop, pre,
                                       post, '' if name is None else
                                       f'{kind}.{name}', ps_id)
    except _kolo.Error as e:
        raise translate(e, not_initialized=not _kolo.is_initialized()) from None
    _handles[h] = (tensor if output is tensor else
                   ((tensor, output), lambda r: output, False))
    return h


def _device_allreduce_async(a, tensor, output, ptr, out_ptr, shape, dtype,
                            op, prescale, postscale, name, process_set, kind):
    _require_init()
    ps_id, n, _ = set_info(process_set)
    kop, pre, post = reduce_args(op, prescale, postscale, n, dtype)
    h = call(_kolo.allreduce_async, ptr, out_ptr, shape, dtype, kop, pre, post,
             '' if name is None else f'{kind}.{name}', ps_id)
    return register(h, (tensor, output, ptr, out_ptr), lambda r: output, False)


def grouped_allreduce_async(a, tensors, outputs, op, prescale, postscale,
                            name, process_set):
    members = []
    for t, o in zip(tensors, outputs):
        ptr, shape, dtype = a.describe(t)
        members.append((ptr, ptr if o is t else a.describe(o)[0], shape, dtype))
    if not members:
        raise ValueError('grouped_allreduce: no tensors given')
    _require_init()
    ps_id, n, _ = set_info(process_set)
    kop, pre, post = reduce_args(op, prescale, postscale, n, members[0][3])
    for m in members[1:]:
        reduce_args(op, prescale, postscale, n, m[3])  # bool checks
    h = call(_kolo.grouped_allreduce_async, members, kop, pre, post,
             name_of('grouped_allreduce', name), ps_id)
    outs = tuple(outputs)
    return register(h, (tuple(tensors), outs, members), lambda r: outs, False)


def _gathered(a, like):
    def finish(r):
        shape, _, buf, _ = r
        return a.from_buffer(buf, shape, like)
    return finish


def allgather_async(a, tensor, name, process_set):
    ptr, shape, dtype = a.describe(tensor)
    _require_init()
    ps_id, _, _ = set_info(process_set)
    h = call(_kolo.allgather_async, ptr, shape, dtype,
             name_of('allgather', name), ps_id)
    return register(h, (tensor, ptr), _gathered(a, tensor))


def grouped_allgather_async(a, tensors, name, process_set):
    members = [a.describe(t) for t in tensors]
    if not members:
        raise ValueError('grouped_allgather: no tensors given')
    _require_init()
    ps_id, _, _ = set_info(process_set)
    h = call(_kolo.grouped_allgather_async, members,
             name_of('grouped_allgather', name), ps_id)
    tensors = tuple(tensors)

    def finish(r):
        return tuple(a.from_buffer(m[2], m[0], t)
                     for m, t in zip(r[3], tensors))
    return register(h, (tensors, members), finish)


def broadcast_async(a, tensor, output, root_rank, name, process_set):
    ptr, shape, dtype = a.describe(tensor)
    if output is not tensor:
        output = a.clone(tensor)
        ptr = a.describe(output)[0]
    _require_init()
    ps_id, _, _ = set_info(process_set)
    if not isinstance(root_rank, int) or isinstance(root_rank, bool):
        raise ValueError(f'broadcast: root_rank must be an int, got {root_rank!r}')
    h = call(_kolo.broadcast_async, ptr, shape, dtype, root_rank,
             name_of('broadcast', name), ps_id)
    return register(h, (tensor, output, ptr), lambda r: output, False)


def alltoall_async(a, tensor, splits, name, process_set):
    ptr, shape, dtype = a.describe(tensor)
    _require_init()
    ps_id, n, _ = set_info(process_set)
    if not shape:
        raise ValueError('alltoall does not support scalar inputs')
    if splits is None:
        if shape[0] % n != 0:
            raise ValueError('splits not provided, but first dimension of '
                             'tensor is not an even multiple of the number '
                             'of workers.')
        values = []
    else:
        if isinstance(splits, (list, tuple)):
            values = list(splits)
        else:
            one_d, is_int32, values = a.splits_info(splits)
            if not one_d:
                raise ValueError('alltoall expects a 1D splits tensor')
            if not is_int32:
                raise ValueError('alltoall expects splits to contain 32-bit '
                                 'integer elements.')
        for v in values:
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f'alltoall: splits must be non-negative '
                                 f'ints, got {values}')
        if len(values) != n:
            raise ValueError('Number of entries in splits does not equal '
                             'number of workers.')
        total = sum(values)
        if total > shape[0]:
            raise ValueError('Sum of splits entries is greater than the first '
                             'dimension of tensor.')
        shape = [total] + shape[1:]  # a smaller sum sends the first rows
    h = call(_kolo.alltoall_async, ptr, shape, dtype, values,
             name_of('alltoall', name), ps_id)

    def finish(r):
        out_shape, recv, buf, _ = r
        return a.from_buffer(buf, out_shape, tensor), a.int32_vector(recv)
    return register(h, (tensor, ptr), finish)


def _scatter_shape(shape, n, index):
    if not shape:
        raise ValueError('Reducescatter does not support scalar inputs')
    rows = shape[0] // n + (1 if index < shape[0] % n else 0)
    return [rows] + shape[1:]


def _scatter_op(op):
    if op == _b.Adasum:
        raise NotImplementedError('kolo: Adasum is not implemented; '
                                  'reducescatter takes Average or Sum')
    if op not in (_b.Average, _b.Sum):
        raise HorovodInternalError(
            'Reducescatter currently only supports AVERAGE and SUM.')


def reducescatter_async(a, tensor, op, prescale, postscale, name,
                        process_set):
    ptr, shape, dtype = a.describe(tensor)
    _scatter_op(op)
    _require_init()
    ps_id, n, index = set_info(process_set)
    out_shape = _scatter_shape(shape, n, max(index, 0))
    kop, pre, post = reduce_args(op, prescale, postscale, n, dtype)
    output = a.empty_like(tensor, out_shape)
    out_ptr = a.describe(output)[0]
    if type(ptr) is not int:
        # A device input's ready event must follow the output's allocation
        # (its memory may have been in use on the stream until then).
        ptr = a.describe(tensor)[0]
    h = call(_kolo.reducescatter_async, ptr, shape, dtype, out_ptr, out_shape,
             kop, pre, post, name_of('reducescatter', name), ps_id)
    return register(h, (tensor, output, ptr, out_ptr), lambda r: output)


def grouped_reducescatter_async(a, tensors, op, prescale, postscale, name,
                                process_set):
    described = [a.describe(t) for t in tensors]
    if not described:
        raise ValueError('grouped_reducescatter: no tensors given')
    _scatter_op(op)
    _require_init()
    ps_id, n, index = set_info(process_set)
    members, outputs = [], []
    for t, (ptr, shape, dtype) in zip(tensors, described):
        out_shape = _scatter_shape(shape, n, max(index, 0))
        out = a.empty_like(t, out_shape)
        outputs.append(out)
        out_ptr = a.describe(out)[0]
        if type(ptr) is not int:  # ready after the output's allocation
            ptr = a.describe(t)[0]
        members.append((ptr, shape, dtype, out_ptr, out_shape))
    kop, pre, post = reduce_args(op, prescale, postscale, n, described[0][2])
    h = call(_kolo.grouped_reducescatter_async, members, kop, pre, post,
             name_of('grouped_reducescatter', name), ps_id)
    outs = tuple(outputs)
    return register(h, (tuple(tensors), outs, members), lambda r: outs)


# ---- Completion -------------------------------------------------------------

def poll(handle):
    """True once the op finished; never blocks."""
    if handle not in _handles:
        raise ValueError(f'Handle {handle} was not created or has been '
                         'cleared.')
    return call(_kolo.poll, handle)


def synchronize(handle):
    """Waits for the op (the GIL released) and returns its output; None for
    a handle that is not in the map."""
    try:
        out = _synchronize_fast(handle)  # an entry that is the output
    except _kolo.Error as e:
        raise translate(e) from None
    if out is not None:
        return out
    entry = _handles.get(handle)
    if entry is None:
        return None
    try:
        result = _kolo.synchronize(handle) if entry[2] else _wait_fast(handle)
    except _kolo.Error as e:
        _handles.pop(handle, None)
        raise translate(e) from None
    _handles.pop(handle, None)  # (init() on another thread may have emptied it)
    return entry[1](result)


def join():
    """Joins (the GIL released); returns the last rank to join."""
    _require_init()
    return call(_kolo.join, -1.0)


def barrier(process_set):
    _require_init()
    ps_id, _, _ = set_info(process_set)
    h = call(_kolo.barrier_async, '', ps_id)
    try:
        _kolo.synchronize(h)
    except _kolo.Error as e:
        raise translate(e) from None
