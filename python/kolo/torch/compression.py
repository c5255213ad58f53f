"""Gradient compression, as horovod.torch.compression: ``Compression.none``
and ``Compression.fp16`` (floating-point tensors travel as float16 and come
back in their dtype; other tensors are unchanged).

Thread-safety: stateless static methods.
"""

import torch


class Compressor:
    """Compresses a tensor before a collective and restores it after."""

    @staticmethod
    def compress(tensor):
        """Returns (compressed tensor, context for decompress)."""
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        """Returns the tensor restored from `tensor` (compressed) and `ctx`
        (what compress returned with it)."""
        raise NotImplementedError


class NoneCompressor(Compressor):
    """No compression: tensors travel as they are."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class FP16Compressor(Compressor):
    """Floating-point tensors travel as float16 and come back in their
    dtype; other tensors are unchanged."""

    @staticmethod
    def compress(tensor):
        ctx = tensor.dtype
        if tensor.dtype.is_floating_point:
            tensor = tensor.type(torch.float16)
        return tensor, ctx

    @staticmethod
    def decompress(tensor, ctx):
        if ctx.is_floating_point:
            tensor = tensor.type(ctx)
        return tensor


class Compression:
    """The compressors, as horovod.torch.Compression: ``Compression.none``
    (NoneCompressor) and ``Compression.fp16`` (FP16Compressor). Pass one to
    allreduce, grouped_allreduce, reducescatter or DistributedOptimizer."""

    none = NoneCompressor
    fp16 = FP16Compressor
