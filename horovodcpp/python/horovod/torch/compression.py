"""Gradient compression applied before communication and undone after it (Horovod's
horovod.torch.compression)."""
import torch


class Compressor:
    """compress(tensor) -> (tensor to send, context); decompress(received, context) -> tensor."""

    @staticmethod
    def compress(tensor):
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    """Sends tensors as they are."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class FP16Compressor(Compressor):
    """Sends floating-point tensors as float16 (half the bytes) and casts the result back to the
    original dtype; other dtypes go unchanged."""

    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating_point and tensor.dtype != torch.float16:
            return tensor.to(torch.float16), tensor.dtype
        return tensor, tensor.dtype

    @staticmethod
    def decompress(tensor, ctx):
        if ctx is not None and ctx.is_floating_point and tensor.dtype != ctx:
            return tensor.to(ctx)
        return tensor


class Compression:
    """The compressors a DistributedOptimizer or allreduce takes: Compression.none, .fp16."""
    none = NoneCompressor
    fp16 = FP16Compressor
