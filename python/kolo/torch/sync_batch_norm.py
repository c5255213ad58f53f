"""kolo.torch.SyncBatchNorm: batch normalisation whose statistics are taken
over the whole global batch (every rank's slice), as horovod.torch's.

As Horovod's, it takes GPU input only: CPU input is refused with
``ValueError('SyncBatchNorm expected input tensor to be on GPU')``; in
evaluation mode with running statistics, and on a single rank, it is a
plain batch norm. The synchronised path (``_SyncBatchNorm``) is written with
plain torch operations and kolo's allreduce on host copies of the
per-channel sums, so it runs on any device kolo.torch can reduce (its math
is tested on CPU tensors directly):
- forward: every rank's per-channel count, sum and sum of squares are summed
  over the ranks; the global mean and (biased) variance normalise the
  input; the running statistics take the global mean and the unbiased
  variance;
- backward: the per-channel sums of dy and dy*(x-mean) are summed over the
  ranks for the input's gradient; the weight's and bias's gradients stay
  local (DistributedOptimizer averages them).

Thread-safety: a module is used by one training thread.
"""

import torch
from torch.nn.modules.batchnorm import _BatchNorm

from kolo.common.basics import Sum, size
from kolo.torch.mpi_ops import allreduce


def _channel_dims(x):
    return [d for d in range(x.dim()) if d != 1]


def _sum_over_ranks(t):
    """t (per-channel float64 sums) summed over every rank."""
    return allreduce(t.detach().to('cpu', torch.float64).contiguous(),
                     op=Sum, name=None).to(t.device)


class _SyncBatchNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, eps,
                momentum):
        # pylint: disable=arguments-differ
        x = x.contiguous()
        dims = _channel_dims(x)
        channels = x.shape[1]
        count = x.numel() // channels if channels else 0
        x64 = x.double()
        local = torch.cat([torch.full((1,), float(count), dtype=torch.float64,
                                      device=x.device),
                           x64.sum(dims), (x64 * x64).sum(dims)])
        total = _sum_over_ranks(local)
        n = total[0].item()
        if n <= 1:
            raise ValueError('SyncBatchNorm: expected more than 1 value per '
                             f'channel over all ranks (got {int(n)})')
        mean = total[1:1 + channels] / n
        var = total[1 + channels:] / n - mean * mean
        invstd = torch.rsqrt(var.clamp_min(0) + eps)
        if running_mean is not None:
            running_mean.mul_(1 - momentum).add_(
                momentum * mean.to(running_mean.dtype))
            running_var.mul_(1 - momentum).add_(
                momentum * (var * n / (n - 1)).to(running_var.dtype))
        shape = [1, channels] + [1] * (x.dim() - 2)
        xhat = (x64 - mean.view(shape)) * invstd.view(shape)
        out = xhat
        if weight is not None:
            out = out * weight.double().view(shape) + \
                bias.double().view(shape)
        ctx.save_for_backward(x, weight, mean, invstd)
        ctx.total = n
        return out.to(x.dtype)

    @staticmethod
    def backward(ctx, grad_output):
        # pylint: disable=arguments-differ
        x, weight, mean, invstd = ctx.saved_tensors
        dims = _channel_dims(x)
        channels = x.shape[1]
        shape = [1, channels] + [1] * (x.dim() - 2)
        dy = grad_output.contiguous().double()
        xmu = x.double() - mean.view(shape)
        sum_dy = dy.sum(dims)
        sum_dy_xmu = (dy * xmu).sum(dims)
        grad_weight = grad_bias = None
        if weight is not None:
            grad_weight = (sum_dy_xmu * invstd).to(weight.dtype)
            grad_bias = sum_dy.to(weight.dtype)
        both = _sum_over_ranks(torch.cat([sum_dy, sum_dy_xmu]))
        mean_dy = (both[:channels] / ctx.total).view(shape)
        mean_dy_xmu = (both[channels:] / ctx.total).view(shape)
        w = weight.double().view(shape) if weight is not None else 1.0
        grad_input = (dy - mean_dy - xmu * (invstd * invstd).view(shape) *
                      mean_dy_xmu) * invstd.view(shape) * w
        return (grad_input.to(x.dtype), grad_weight, grad_bias, None, None,
                None, None)


class SyncBatchNorm(_BatchNorm):
    """Batch normalisation over the global batch: while training, every
    rank's per-channel count, sum and sum of squares are summed over the
    ranks, and the global mean and variance normalise the input (the
    running statistics take the global mean and the unbiased variance).
    As Horovod's, it takes CUDA input only (CPU input raises ValueError); in
    evaluation mode with running statistics, and on a single rank, it is a
    plain batch norm."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True):
        super().__init__(num_features, eps, momentum, affine,
                         track_running_stats)

    def _check_input_dim(self, input):  # pylint: disable=redefined-builtin
        if input.dim() < 2:
            raise ValueError(
                f'expected at least 2D input (got {input.dim()}D input)')

    def _run_bn(self, x):
        return torch.nn.functional.batch_norm(
            x, self.running_mean, self.running_var, self.weight, self.bias,
            self.training or not self.track_running_stats, self.momentum,
            self.eps)

    def _maybe_run_sync_bn(self, x):
        if size() == 1:
            return self._run_bn(x)
        return _SyncBatchNorm.apply(x, self.weight, self.bias,
                                    self.running_mean, self.running_var,
                                    self.eps, self.momentum)

    def forward(self, input):  # pylint: disable=redefined-builtin
        """Normalises `input` (a CUDA tensor of at least 2 dimensions)."""
        if not input.is_cuda:
            raise ValueError('SyncBatchNorm expected input tensor to be on GPU')
        self._check_input_dim(input)
        if self.training and self.track_running_stats:
            self.num_batches_tracked = self.num_batches_tracked + 1
        if not self.training and self.track_running_stats:
            return self._run_bn(input)
        return self._maybe_run_sync_bn(input)
