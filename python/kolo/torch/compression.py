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
        raise NotImplementedError


class NoneCompressor(Compressor):
    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class FP16Compressor(Compressor):
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
    none = NoneCompressor
    fp16 = FP16Compressor
