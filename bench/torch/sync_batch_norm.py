"""BatchNormalization with the statistics of the global batch, for DDP on the CPU over gloo:
torch 1.13's nn.SyncBatchNorm runs on CUDA only. The same algorithm as tandem's sync mode
(src/model/sync-batch-norm.ts): forward all-reduces the per-channel sums and the sample count,
then the squared deviations from the global mean; backward all-reduces sum(dy) and
sum(dy * x_hat). The weight and bias gradients stay local sums: DDP averages them.
Imports torch: import it only after harness.py has set the thread counts.
"""
import torch
import torch.distributed as dist
from torch import nn

CHANNEL_SUM = (0, 2, 3)  # NCHW: sum over batch, height, width


def per_channel(v):
    return v.view(1, -1, 1, 1)


class _SyncBatchNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, bn, group):
        channels = x.shape[1]
        sums = torch.cat([x.sum(CHANNEL_SUM), x.new_tensor([x.numel() // channels])])
        dist.all_reduce(sums, group=group)
        count = sums[channels]
        mean = sums[:channels] / count
        centred = x - per_channel(mean)
        squares = centred.square().sum(CHANNEL_SUM)
        dist.all_reduce(squares, group=group)
        var = squares / count
        invstd = torch.rsqrt(var + bn.eps)
        x_hat = centred * per_channel(invstd)
        with torch.no_grad():
            bn.running_mean.lerp_(mean, bn.momentum)
            bn.running_var.lerp_(var * count / (count - 1), bn.momentum)  # unbiased, as BatchNorm2d
            bn.num_batches_tracked.add_(1)
        ctx.save_for_backward(x_hat, weight, invstd, count)
        ctx.group = group
        return x_hat * per_channel(weight) + per_channel(bias)

    @staticmethod
    def backward(ctx, dy):
        x_hat, weight, invstd, count = ctx.saved_tensors
        channels = dy.shape[1]
        local = torch.cat([dy.sum(CHANNEL_SUM), (dy * x_hat).sum(CHANNEL_SUM)])
        total = local.clone()
        dist.all_reduce(total, group=ctx.group)
        mean_dy, mean_dy_xhat = total[:channels] / count, total[channels:] / count
        dx = per_channel(weight * invstd) * (dy - per_channel(mean_dy) - x_hat * per_channel(mean_dy_xhat))
        return dx, local[channels:], local[:channels], None, None


class SyncBatchNorm2d(nn.BatchNorm2d):
    """nn.BatchNorm2d (same parameters and buffers) whose training forward uses the group's batch."""

    def __init__(self, bn, group):
        super().__init__(bn.num_features, bn.eps, bn.momentum, bn.affine, bn.track_running_stats)
        self.load_state_dict(bn.state_dict())
        self.group = group

    def forward(self, x):
        if not self.training:
            return super().forward(x)
        return _SyncBatchNormFunction.apply(x, self.weight, self.bias, self, self.group)


def convert_sync_batch_norm(model, group):
    """Replaces every nn.BatchNorm2d of `model` (in place) by a SyncBatchNorm2d over `group`."""
    for name, child in model.named_children():
        if isinstance(child, nn.BatchNorm2d) and not isinstance(child, SyncBatchNorm2d):
            setattr(model, name, SyncBatchNorm2d(child, group))
        else:
            convert_sync_batch_norm(child, group)
    return model
