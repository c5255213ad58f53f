"""kolo.torch._autograd: the differentiable collectives of kolo.torch, with
Horovod's backward definitions (quirks included; the reference lists them):

- allreduce / grouped_allreduce: backward is the same (grouped) allreduce of
  the gradient (same op, average, scale factors, process set), for
  Min/Max/Product too;
- allgather / grouped_allgather: backward averages the gradient over the
  set and keeps this rank's rows (their offset from an allgather of every
  rank's first dimension);
- broadcast: backward averages the gradient over the set, times 0 on every
  rank but the root (compared with the *global* rank, as Horovod does);
- alltoall: backward sends the gradient back with the received splits;
  received_splits is not differentiable;
- reducescatter / grouped_reducescatter: backward allgathers the gradient,
  times the set size for Sum, times the prescale and postscale factors.

The collectives inside backward are unnamed, so every rank must run them in
the same order (as in Horovod). kolo.torch.mpi_ops exports these functions
(``hvd.allreduce`` etc.); the *_async and in-place forms are not
differentiable, as in Horovod.

Thread-safety: as the collectives.
"""

import torch

from kolo.common.basics import Average, Sum, rank
from kolo.common.process_sets import global_process_set
from kolo.torch import mpi_ops as _ops
from kolo.torch.compression import Compression


class HorovodAllreduce(torch.autograd.Function):
    """Allreduce of one tensor."""

    @staticmethod
    def forward(ctx, tensor, average, name, op, prescale_factor,
                postscale_factor, process_set):
        # pylint: disable=arguments-differ
        ctx.average = average
        ctx.op = op
        ctx.prescale_factor = prescale_factor
        ctx.postscale_factor = postscale_factor
        ctx.process_set = process_set
        return _ops.synchronize(_ops.allreduce_async(
            tensor, average, name, op, prescale_factor, postscale_factor,
            process_set))

    @staticmethod
    def backward(ctx, grad_output):
        # pylint: disable=arguments-differ
        return (allreduce(grad_output.contiguous(), average=ctx.average, op=ctx.op,
                          prescale_factor=ctx.prescale_factor,
                          postscale_factor=ctx.postscale_factor,
                          process_set=ctx.process_set),
                None, None, None, None, None, None)


class HorovodGroupedAllreduce(torch.autograd.Function):
    """Allreduce of several tensors as one op."""

    @staticmethod
    def forward(ctx, average, name, op, prescale_factor, postscale_factor,
                process_set, *tensors):
        # pylint: disable=arguments-differ
        ctx.average = average
        ctx.op = op
        ctx.prescale_factor = prescale_factor
        ctx.postscale_factor = postscale_factor
        ctx.process_set = process_set
        return tuple(_ops.synchronize(_ops.grouped_allreduce_async(
            list(tensors), average, name, op, prescale_factor,
            postscale_factor, process_set)))

    @staticmethod
    def backward(ctx, *grad_output):
        grads = grouped_allreduce([g.contiguous() for g in grad_output],
                                  average=ctx.average,
                                  op=ctx.op,
                                  prescale_factor=ctx.prescale_factor,
                                  postscale_factor=ctx.postscale_factor,
                                  process_set=ctx.process_set)
        return (None,) * 6 + tuple(grads)


def _my_rows_offset(dim, process_set):
    """The first row of this rank's part in an allgather along dim 0."""
    dims = _ops.allgather(torch.IntTensor([dim]), process_set=process_set)
    r = process_set.rank()
    return int(dims[:r].sum().item()) if r > 0 else 0


class HorovodAllgather(torch.autograd.Function):
    """Allgather along the first dimension."""

    @staticmethod
    def forward(ctx, tensor, name, process_set):
        # pylint: disable=arguments-differ
        ctx.dim = tensor.shape[0]
        ctx.process_set = process_set
        return _ops.synchronize(_ops.allgather_async(tensor, name,
                                                     process_set))

    @staticmethod
    def backward(ctx, grad_output):
        # pylint: disable=arguments-differ
        reduced = allreduce(grad_output.contiguous(), op=Average,
                            process_set=ctx.process_set)
        offset = _my_rows_offset(ctx.dim, ctx.process_set)
        return reduced.narrow(0, offset, ctx.dim), None, None


class HorovodGroupedAllgather(torch.autograd.Function):
    """Allgather of several tensors as one op."""

    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        # pylint: disable=arguments-differ
        ctx.dims = [t.shape[0] for t in tensors]
        ctx.process_set = process_set
        return tuple(_ops.synchronize(_ops.grouped_allgather_async(
            list(tensors), name, process_set)))

    @staticmethod
    def backward(ctx, *grad_output):
        reduced = grouped_allreduce([g.contiguous() for g in grad_output],
                                    op=Average,
                                    process_set=ctx.process_set)
        dims = _ops.allgather(torch.IntTensor(ctx.dims).view(1, -1),
                              process_set=ctx.process_set)
        r = ctx.process_set.rank()
        offsets = dims[:r].sum(dim=0).tolist() if r > 0 else [0] * len(
            ctx.dims)
        return (None, None) + tuple(
            g.narrow(0, int(off), d)
            for g, off, d in zip(reduced, offsets, ctx.dims))


class HorovodBroadcast(torch.autograd.Function):
    """Broadcast from a root rank (a global rank)."""

    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        # pylint: disable=arguments-differ
        ctx.root_rank = root_rank
        ctx.process_set = process_set
        return _ops.synchronize(_ops.broadcast_async(tensor, root_rank, name,
                                                     process_set))

    @staticmethod
    def backward(ctx, grad_output):
        # pylint: disable=arguments-differ
        reduced = allreduce(grad_output.contiguous(), op=Average,
                            process_set=ctx.process_set)
        if rank() != ctx.root_rank:
            reduced *= 0
        return reduced, None, None, None


class HorovodAlltoall(torch.autograd.Function):
    """Alltoall with splits; received_splits is not differentiable."""

    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        # pylint: disable=arguments-differ
        output, received = _ops.synchronize(_ops.alltoall_async(
            tensor, splits, name, process_set))
        ctx.process_set = process_set
        ctx.recvsplits = received
        if splits is None:
            return output
        ctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(ctx, grad_output, *dead_gradients):
        # pylint: disable=arguments-differ
        grad, _ = alltoall(grad_output.contiguous(), splits=ctx.recvsplits,
                           process_set=ctx.process_set)
        return grad, None, None, None


def _reducescatter_backward_scale(ctx, grad):
    if ctx.op == Sum:
        grad = grad * ctx.process_set.size()
    if ctx.prescale_factor != 1.0:
        grad = grad * ctx.prescale_factor
    if ctx.postscale_factor != 1.0:
        grad = grad * ctx.postscale_factor
    return grad


class HorovodReducescatter(torch.autograd.Function):
    """Reducescatter along the first dimension."""

    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor,
                postscale_factor):
        # pylint: disable=arguments-differ
        ctx.op = op
        ctx.process_set = process_set
        ctx.prescale_factor = prescale_factor
        ctx.postscale_factor = postscale_factor
        return _ops.synchronize(_ops.reducescatter_async(
            tensor, name, op, process_set, prescale_factor, postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        # pylint: disable=arguments-differ
        grad = _reducescatter_backward_scale(ctx, grad_output.contiguous())
        return (allgather(grad, process_set=ctx.process_set), None, None,
                None, None, None)


class HorovodGroupedReducescatter(torch.autograd.Function):
    """Reducescatter of several tensors as one op."""

    @staticmethod
    def forward(ctx, name, op, process_set, prescale_factor,
                postscale_factor, *tensors):
        # pylint: disable=arguments-differ
        ctx.op = op
        ctx.process_set = process_set
        ctx.prescale_factor = prescale_factor
        ctx.postscale_factor = postscale_factor
        return tuple(_ops.synchronize(_ops.grouped_reducescatter_async(
            list(tensors), name, op, process_set, prescale_factor,
            postscale_factor)))

    @staticmethod
    def backward(ctx, *grad_output):
        grads = [_reducescatter_backward_scale(ctx, g.contiguous())
                 for g in grad_output]
        return (None,) * 5 + tuple(
            grouped_allgather(grads, process_set=ctx.process_set))


# ---- the public, differentiable forms ----------------------------------------

def allreduce(tensor, average=None, name=None, compression=Compression.none,
              op=None, prescale_factor=1.0, postscale_factor=1.0,
              process_set=global_process_set):
    """The reduction (Average by default) of `tensor` over the set, as a new
    tensor; differentiable."""
    compressed, ctx = compression.compress(tensor)
    out = HorovodAllreduce.apply(compressed, average, name, op,
                                 prescale_factor, postscale_factor,
                                 process_set)
    return compression.decompress(out, ctx)


def grouped_allreduce(tensors, average=None, name=None,
                      compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set):
    """Allreduce of several tensors as one op; returns a list;
    differentiable."""
    pairs = [compression.compress(t) for t in tensors]
    outs = HorovodGroupedAllreduce.apply(average, name, op, prescale_factor,
                                         postscale_factor, process_set,
                                         *[p[0] for p in pairs])
    return [compression.decompress(o, ctx) for o, (_, ctx) in zip(outs, pairs)]


def allgather(tensor, name=None, process_set=global_process_set):
    """Every rank's tensor concatenated along the first dimension, in set
    order; differentiable."""
    return HorovodAllgather.apply(tensor, name, process_set)


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """Allgather of several tensors as one op; returns a tuple;
    differentiable."""
    return tuple(HorovodGroupedAllgather.apply(name, process_set, *tensors))


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """`root_rank`'s tensor (a global rank), as a new tensor;
    differentiable."""
    return HorovodBroadcast.apply(tensor, root_rank, name, process_set)


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Sends splits[r] rows to rank r of the set (even split when None);
    returns the output, or (output, received_splits) when splits are given;
    differentiable in the output."""
    return HorovodAlltoall.apply(tensor, splits, name, process_set)


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=global_process_set, prescale_factor=1.0,
                  postscale_factor=1.0):
    """This rank's rows of the reduction (Average by default);
    differentiable."""
    compressed, ctx = compression.compress(tensor)
    out = HorovodReducescatter.apply(compressed, name, op, process_set,
                                     prescale_factor, postscale_factor)
    return compression.decompress(out, ctx)


def grouped_reducescatter(tensors, name=None, compression=Compression.none,
                          op=Average, process_set=global_process_set,
                          prescale_factor=1.0, postscale_factor=1.0):
    """Reducescatter of several tensors as one op; returns a list;
    differentiable."""
    pairs = [compression.compress(t) for t in tensors]
    outs = HorovodGroupedReducescatter.apply(name, op, process_set,
                                             prescale_factor,
                                             postscale_factor,
                                             *[p[0] for p in pairs])
    return [compression.decompress(o, ctx) for o, (_, ctx) in zip(outs, pairs)]
