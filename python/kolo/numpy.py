"""kolo.numpy: kolo's collectives on NumPy arrays, for users without torch.

The same functions, defaults and exceptions as kolo.torch (Horovod's), on
C-contiguous host arrays; outputs are new arrays, in-place forms (``_``)
return the same array object. ``kolo.allreduce(...)`` etc. are these.

Thread-safety: as kolo.torch (see kolo/_engine.py).
"""

import numpy as np

from kolo import _engine as _e
from kolo import _kolo
from kolo.common.basics import Average
from kolo.common.process_sets import global_process_set

_CODES = {}
for _code, _name in enumerate(_kolo.DTYPES):
    if _name != 'bfloat16':  # NumPy has no bfloat16
        _CODES[np.dtype('bool' if _name == 'bool' else _name)] = _code


class _NumpyAdapter(_e.Adapter):
    def describe(self, array):
        if not isinstance(array, np.ndarray):
            raise ValueError('kolo.numpy: expected a numpy.ndarray, got '
                             f'{type(array).__name__}')
        code = _CODES.get(array.dtype)
        if code is None:
            raise ValueError(f'Tensor type {array.dtype} is not supported.')
        if not array.flags.c_contiguous:
            raise ValueError('Tensor is required to be contiguous.')
        return array.__array_interface__['data'][0], list(array.shape), code

    def empty_like(self, array, shape=None):
        return np.empty(array.shape if shape is None else shape,
                        dtype=array.dtype)

    def clone(self, array):
        return array.copy()

    def from_buffer(self, buf, shape, like):
        if buf is None or len(buf) == 0:
            return np.empty(shape, dtype=like.dtype)
        return np.frombuffer(buf, dtype=like.dtype).reshape(shape)

    def int32_vector(self, values):
        return np.asarray(values, dtype=np.int32)

    def splits_info(self, splits):
        a = np.asarray(splits)
        return (a.ndim == 1, a.dtype == np.int32,
                [int(v) for v in a.tolist()] if a.ndim == 1 else [])


_A = _NumpyAdapter()


def _writable(array):
    if isinstance(array, np.ndarray) and not array.flags.writeable:
        raise ValueError('kolo.numpy: the array is read-only; an in-place op '
                         'needs a writable array')
    return array


def allreduce_async(array, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set):
    """Starts an allreduce into a new array; returns a handle for
    synchronize()."""
    op = _e.resolve_op(op, None)
    _A.describe(array)
    return _e.allreduce_async(_A, array, _A.empty_like(array), op,
                              prescale_factor, postscale_factor, name,
                              process_set)


def allreduce(array, name=None, op=None, prescale_factor=1.0,
              postscale_factor=1.0, process_set=global_process_set):
    """The reduction (Average by default) over the set, as a new array."""
    return synchronize(allreduce_async(array, name, op, prescale_factor,
                                       postscale_factor, process_set))


def allreduce_async_(array, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    """Starts an in-place allreduce of `array`; returns a handle."""
    op = _e.resolve_op(op, None)
    return _e.allreduce_async(_A, _writable(array), array, op,
                              prescale_factor, postscale_factor, name,
                              process_set)


def allreduce_(array, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    """In-place allreduce; returns `array` itself."""
    return synchronize(allreduce_async_(array, name, op, prescale_factor,
                                        postscale_factor, process_set))


def grouped_allreduce(arrays, name=None, op=None, prescale_factor=1.0,
                      postscale_factor=1.0, process_set=global_process_set):
    """Allreduce of several arrays as one op; returns a list of new
    arrays."""
    op = _e.resolve_op(op, None)
    arrays = list(arrays)
    outputs = [_A.empty_like(a) for a in arrays if _A.describe(a)]
    return list(synchronize(_e.grouped_allreduce_async(
        _A, arrays, outputs, op, prescale_factor, postscale_factor, name,
        process_set)))


def allgather_async(array, name=None, process_set=global_process_set):
    """Starts an allgather; returns a handle."""
    return _e.allgather_async(_A, array, name, process_set)


def allgather(array, name=None, process_set=global_process_set):
    """Every rank's array concatenated along the first dimension, in set
    order (first dimensions may differ), as a new array."""
    return synchronize(allgather_async(array, name, process_set))


def broadcast_async(array, root_rank, name=None,
                    process_set=global_process_set):
    """Starts a broadcast into a new array; returns a handle."""
    return _e.broadcast_async(_A, array, None, root_rank, name, process_set)


def broadcast(array, root_rank, name=None, process_set=global_process_set):
    """`root_rank`'s array (a global rank), as a new array."""
    return synchronize(broadcast_async(array, root_rank, name, process_set))


def broadcast_(array, root_rank, name=None, process_set=global_process_set):
    """In-place broadcast; returns `array` itself."""
    return synchronize(_e.broadcast_async(_A, _writable(array), array,
                                          root_rank, name, process_set))


def alltoall_async(array, splits=None, name=None,
                   process_set=global_process_set):
    """Starts an alltoall; its synchronize() returns (output,
    received_splits)."""
    return _e.alltoall_async(_A, array, splits, name, process_set)


def alltoall(array, splits=None, name=None, process_set=global_process_set):
    """Sends splits[r] rows to rank r of the set (an even split when None);
    returns the output, or (output, received_splits) when splits are
    given."""
    output, received = synchronize(alltoall_async(array, splits, name,
                                                  process_set))
    return output if splits is None else (output, received)


def reducescatter_async(array, name=None, op=Average,
                        process_set=global_process_set, prescale_factor=1.0,
                        postscale_factor=1.0):
    """Starts a reducescatter; returns a handle."""
    return _e.reducescatter_async(_A, array, op, prescale_factor,
                                  postscale_factor, name, process_set)


def reducescatter(array, name=None, op=Average,
                  process_set=global_process_set, prescale_factor=1.0,
                  postscale_factor=1.0):
    """This rank's rows of the reduction (Average by default): n // k rows,
    one more on the first n % k ranks of the set."""
    return synchronize(reducescatter_async(array, name, op, process_set,
                                           prescale_factor, postscale_factor))


def poll(handle):
    """True once the op of `handle` finished (never blocks)."""
    return _e.poll(handle)


def synchronize(handle):
    """Waits for `handle` and returns its output."""
    return _e.synchronize(handle)


def join():
    """This rank has no more batches: it contributes zeros to the others'
    allreduces until every rank joined. Returns the last rank to join."""
    return _e.join()


def barrier(process_set=global_process_set):
    """Returns once every rank of the set entered it."""
    _e.barrier(process_set)
