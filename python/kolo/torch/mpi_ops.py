"""kolo.torch.mpi_ops: Horovod's torch collectives on CPU and CUDA tensors.

Every function keeps horovod.torch's signature, defaults, return types and
exceptions (those of horovod.torch 0.28.1):
- checks in Horovod's order before anything else (even before init):
  unsupported dtype -> ValueError('Tensor type ... is not supported.'), then
  non-contiguous -> ValueError('Tensor is required to be contiguous.');
- caller mistakes at submission -> ValueError; disagreements between ranks
  and failures at synchronize -> HorovodInternalError; the job goes on;
- in-place forms run on the tensor's own memory and return the same object;
- Average is a Sum with postscale / set size, bit-exact with Horovod.
Dtypes: every dtype of Horovod plus uint8/int8/int16/bfloat16/bool for
every op (Average of bool is refused).

CUDA tensors: every op takes them (kolo runs them on NCCL when it was built
with it, else through pinned host memory on its own data plane). Each
submission records a CUDA event on the tensor's current stream, after the
work that wrote it (and after any output was allocated), and kolo's stream
waits for it before reading, as Horovod's ready events; the event lives in
the handle's entry until synchronize(). synchronize() returns once kolo's
stream has written the output, so the caller's stream may use it at once.
Outputs kolo sizes itself (allgather, alltoall) are device memory handed
over through DLPack, without a copy. All tensors of one op must be on one
device kind; kolo uses one CUDA device per rank.

Thread-safety: as Horovod's (see kolo/_engine.py).
"""

import torch
import torch.utils.dlpack

from kolo import _engine as _e
from kolo import _kolo
from kolo.common.basics import (  # noqa: F401
    Adasum, Average, Max, Min, Product, Sum, ccl_built, cross_rank,
    cross_size, cuda_built, ddl_built, gloo_built, gloo_enabled, init,
    is_homogeneous, is_initialized, local_rank, local_size, mpi_built,
    mpi_enabled, mpi_threads_supported, nccl_built, rank, rocm_built,
    shutdown, size, start_timeline, stop_timeline)
from kolo.common.basics import _KOLO_OP
from kolo.common.process_sets import (  # noqa: F401
    ProcessSet, add_process_set, global_process_set, remove_process_set)
from kolo.torch.compression import Compression

_CODES = {getattr(torch, name): code for code, name in enumerate(_kolo.DTYPES)}
# allreduce_async_'s hot path (kolo._kolo.allreduce_tensor_fast): the
# dtypes it takes (bool has rules of its own) and what it needs to know.
_kolo.set_tensor_fast_path(
    torch.Tensor, torch.strided,
    {d: code for d, code in _CODES.items() if code != _e.BOOL}, _KOLO_OP,
    Average)
try:  # torch's C++ accessors read the tensor (kolo._kolo_c10d, when built)
    from kolo import _kolo_c10d
    _kolo.set_tensor_reader(_kolo_c10d.tensor_reader)
except ImportError:
    pass  # a build without Torch's C++ package: torch's Python attributes
_allreduce_tensor = _kolo.allreduce_tensor_fast
_synchronize_fast = _kolo.synchronize_fast


class _TorchAdapter(_e.Adapter):
    def describe(self, tensor):
        if not isinstance(tensor, torch.Tensor):
            raise ValueError('kolo.torch: expected a torch.Tensor, got '
                             f'{type(tensor).__name__}')
        code = _CODES.get(tensor.dtype)
        if code is None or tensor.layout != torch.strided:
            raise ValueError('Tensor type %s is not supported.' % tensor.type())
        if not tensor.is_contiguous():
            raise ValueError('Tensor is required to be contiguous.')
        kind = tensor.device.type
        if kind == 'cuda':
            return _cuda_pointer(tensor), list(tensor.shape), code
        if kind != 'cpu':
            raise ValueError(
                f'kolo.torch: the tensor is on {tensor.device}; kolo takes '
                'CPU and CUDA tensors')
        return tensor.data_ptr(), list(tensor.shape), code

    def empty_like(self, tensor, shape=None):
        return torch.empty(tensor.shape if shape is None else shape,
                           dtype=tensor.dtype, device=tensor.device)

    def clone(self, tensor):
        return tensor.detach().clone()

    def from_buffer(self, buf, shape, like):
        if buf is not None and buf.device != _kolo.CPU:
            return torch.utils.dlpack.from_dlpack(
                _kolo.dlpack(buf, list(shape), _CODES[like.dtype]))
        if buf is None or len(buf) == 0:
            return torch.empty(shape, dtype=like.dtype, device=like.device)
        return torch.frombuffer(buf, dtype=like.dtype).view(shape)

    def int32_vector(self, values):
        return torch.tensor(values, dtype=torch.int32)

    def splits_info(self, splits):
        if not isinstance(splits, torch.Tensor):
            raise ValueError('alltoall expects splits as a list or an int32 '
                             f'tensor, got {type(splits).__name__}')
        return (splits.dim() == 1, splits.dtype == torch.int32,
                [int(v) for v in splits.tolist()] if splits.dim() == 1 else [])


def _cuda_pointer(tensor):
    """The tensor's address on its device, with a CUDA event recorded now
    on its current stream (kept alive by the returned object, which the
    engine keeps in the handle's entry)."""
    event = torch.cuda.Event()
    event.record(torch.cuda.current_stream(tensor.device))
    p = _kolo.DevicePointer(tensor.data_ptr(), tensor.device.index,
                            event.cuda_event)
    p.event = event
    return p


_A = _TorchAdapter()


# ---- allreduce --------------------------------------------------------------

def allreduce_async(tensor, average=None, name=None, op=None,
                    prescale_factor=1.0, postscale_factor=1.0,
                    process_set=global_process_set):
    """Starts an allreduce into a new tensor; returns a handle."""
    op = _e.resolve_op(op, average)
    _A.describe(tensor)  # Horovod's checks before the output is made
    return _e.allreduce_async(_A, tensor, _A.empty_like(tensor), op,
                              prescale_factor, postscale_factor, name,
                              process_set)


def allreduce(tensor, average=None, name=None, compression=Compression.none,
              op=None, prescale_factor=1.0, postscale_factor=1.0,
              process_set=global_process_set):
    """The reduction (Average by default) of `tensor` over the set, as a new
    tensor."""
    compressed, ctx = compression.compress(tensor)
    h = allreduce_async(compressed, average, name, op, prescale_factor,
                        postscale_factor, process_set)
    return compression.decompress(synchronize(h), ctx)


def allreduce_async_(tensor, average=None, name=None, op=None,
                     prescale_factor=1.0, postscale_factor=1.0,
                     process_set=global_process_set):
    """Starts an in-place allreduce; returns a handle."""
    if op is None or average is not None:
        op = _e.resolve_op(op, average)
    # The hot path of a training step (one call per gradient, as Horovod's
    # optimizer submits them), in C: a contiguous CPU tensor of a numeric
    # dtype on the global set, with Average, Sum, Min, Max or Product --
    # _A.describe's checks and _e.allreduce_async's steps. None: anything
    # else, or an error, which the general path raises.
    if process_set is global_process_set:
        try:
            h = _allreduce_tensor(tensor, op, prescale_factor,
                                  postscale_factor, name)
        except _kolo.Error as e:
            raise _e.translate(
                e, not_initialized=not _kolo.is_initialized()) from None
        if h is not None:
            return h
    return _e.allreduce_async(_A, tensor, tensor, op, prescale_factor,
                              postscale_factor, name, process_set)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    """In-place allreduce; returns `tensor` itself."""
    return synchronize(allreduce_async_(tensor, average, name, op,
                                        prescale_factor, postscale_factor,
                                        process_set))


def _check(tensor):
    _A.describe(tensor)
    return tensor


def grouped_allreduce_async(tensors, average=None, name=None, op=None,
                            prescale_factor=1.0, postscale_factor=1.0,
                            process_set=global_process_set):
    """Starts one allreduce of several tensors into new tensors; its
    synchronize returns a tuple."""
    op = _e.resolve_op(op, average)
    tensors = list(tensors)
    outputs = [_A.empty_like(_check(t)) for t in tensors]
    return _e.grouped_allreduce_async(_A, tensors, outputs, op,
                                      prescale_factor, postscale_factor, name,
                                      process_set)


def grouped_allreduce(tensors, average=None, name=None,
                      compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set):
    """Allreduce of several tensors as one op; returns a list."""
    pairs = [compression.compress(t) for t in tensors]
    h = grouped_allreduce_async([p[0] for p in pairs], average, name, op,
                                prescale_factor, postscale_factor, process_set)
    return [compression.decompress(out, ctx)
            for out, (_, ctx) in zip(synchronize(h), pairs)]


def grouped_allreduce_async_(tensors, average=None, name=None, op=None,
                             prescale_factor=1.0, postscale_factor=1.0,
                             process_set=global_process_set):
    """Starts one in-place allreduce of several tensors; returns a
    handle."""
    op = _e.resolve_op(op, average)
    tensors = list(tensors)
    return _e.grouped_allreduce_async(_A, tensors, tensors, op,
                                      prescale_factor, postscale_factor, name,
                                      process_set)


def grouped_allreduce_(tensors, average=None, name=None, op=None,
                       prescale_factor=1.0, postscale_factor=1.0,
                       process_set=global_process_set):
    """In-place grouped allreduce; returns a tuple of the input objects."""
    return synchronize(grouped_allreduce_async_(
        tensors, average, name, op, prescale_factor, postscale_factor,
        process_set))


# ---- allgather --------------------------------------------------------------

def allgather_async(tensor, name=None, process_set=global_process_set):
    """Starts an allgather into a new tensor; returns a handle."""
    return _e.allgather_async(_A, tensor, name, process_set)


def allgather(tensor, name=None, process_set=global_process_set):
    """Every rank's tensor concatenated along the first dimension, in set
    order (first dimensions may differ)."""
    return synchronize(allgather_async(tensor, name, process_set))


def grouped_allgather_async(tensors, name=None,
                            process_set=global_process_set):
    """Starts one allgather of several tensors; its synchronize returns a
    tuple."""
    return _e.grouped_allgather_async(_A, list(tensors), name, process_set)


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """Allgather of several tensors as one op; returns a tuple."""
    return synchronize(grouped_allgather_async(tensors, name, process_set))


# ---- broadcast --------------------------------------------------------------

def broadcast_async(tensor, root_rank, name=None,
                    process_set=global_process_set):
    """Starts a broadcast into a copy (the input stays untouched)."""
    return _e.broadcast_async(_A, tensor, None, root_rank, name, process_set)


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """`root_rank`'s tensor (a global rank), as a new tensor."""
    return synchronize(broadcast_async(tensor, root_rank, name, process_set))


def broadcast_async_(tensor, root_rank, name=None,
                     process_set=global_process_set):
    """Starts an in-place broadcast; returns a handle."""
    return _e.broadcast_async(_A, tensor, tensor, root_rank, name,
                              process_set)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """In-place broadcast; returns `tensor` itself."""
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


# ---- alltoall ---------------------------------------------------------------

def alltoall_async(tensor, splits=None, name=None,
                   process_set=global_process_set):
    """Starts an alltoall; its synchronize returns (output,
    received_splits)."""
    return _e.alltoall_async(_A, tensor, splits, name, process_set)


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Sends splits[r] rows to rank r of the set (even split when None);
    returns the output, or (output, received_splits) when splits are
    given."""
    output, received = synchronize(alltoall_async(tensor, splits, name,
                                                  process_set))
    return output if splits is None else (output, received)


# ---- reducescatter ----------------------------------------------------------

def reducescatter_async(tensor, name=None, op=Average,
                        process_set=global_process_set, prescale_factor=1.0,
                        postscale_factor=1.0):
    """Starts a reducescatter into a new tensor; returns a handle."""
    return _e.reducescatter_async(_A, tensor, op, prescale_factor,
                                  postscale_factor, name, process_set)


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=global_process_set, prescale_factor=1.0,
                  postscale_factor=1.0):
    """This rank's rows of the reduction: n // k rows, one more on the first
    n % k ranks of the set."""
    compressed, ctx = compression.compress(tensor)
    h = reducescatter_async(compressed, name, op, process_set,
                            prescale_factor, postscale_factor)
    return compression.decompress(synchronize(h), ctx)


def grouped_reducescatter_async(tensors, name=None, op=Average,
                                process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    """Starts one reducescatter of several tensors; its synchronize returns
    a tuple."""
    return _e.grouped_reducescatter_async(_A, list(tensors), op,
                                          prescale_factor, postscale_factor,
                                          name, process_set)


def grouped_reducescatter(tensors, name=None, compression=Compression.none,
                          op=Average, process_set=global_process_set,
                          prescale_factor=1.0, postscale_factor=1.0):
    """Reducescatter of several tensors as one op; returns a list."""
    pairs = [compression.compress(t) for t in tensors]
    h = grouped_reducescatter_async([p[0] for p in pairs], name, op,
                                    process_set, prescale_factor,
                                    postscale_factor)
    return [compression.decompress(out, ctx)
            for out, (_, ctx) in zip(synchronize(h), pairs)]


# ---- completion, join, barrier ---------------------------------------------

def poll(handle):
    """True once the op of `handle` finished (never blocks)."""
    return _e.poll(handle)


def synchronize(handle):
    """Waits for `handle` (other Python threads run meanwhile) and returns
    its output (a tensor, a tuple, or None for an unknown handle)."""
    # The hot path (an in-place allreduce's tensor), then the general one.
    try:
        out = _synchronize_fast(handle)
    except _kolo.Error as e:
        raise _e.translate(e) from None
    return _e.synchronize(handle) if out is None else out


def join(device=-1):  # pylint: disable=unused-argument
    """This rank has no more batches: it contributes zeros to the others'
    allreduces until every rank joined. Returns the last rank to join."""
    return _e.join()


def barrier(process_set=global_process_set):
    """Returns once every rank of the set entered it."""
    _e.barrier(process_set)


# The differentiable forms (kolo/torch/_autograd.py: Horovod's autograd
# Functions) are the public ones, as in horovod.torch.mpi_ops.
from kolo.torch._autograd import (  # noqa: E402,F401 pylint: disable=wrong-import-position
    allgather, allreduce, alltoall, broadcast, grouped_allgather,
    grouped_allreduce, grouped_reducescatter, reducescatter)
