"""PyTorch modules that compute what the tfjs layers of tandem's builtin models compute, so that a
reference model in bench/torch/ has the same layers, shapes, padding and BatchNormalization
settings. Imports torch: import it only after harness.py has set the thread counts.

  conv_same     Conv2D / DepthwiseConv2D (no bias) with padding 'same' as TensorFlow pads: for
                stride 2 on an even size, nothing before and one row/column after (PyTorch's
                padding=1 pads both sides, which shifts every window by one pixel)
  batch_norm    BatchNormalization with tfjs's defaults: momentum 0.99 (PyTorch's 0.01: it
                weighs the new batch, Keras the old average), epsilon 1e-3
  Residual      tf.layers.add() of a block and its shortcut, then relu
  glorot_init_  tfjs's default initialisers: Glorot uniform kernels, zero biases
"""
from torch import nn


def tf_same_pads(size, kernel, stride):
    """(before, after) padding of one spatial dimension under TensorFlow's 'same'."""
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def conv_same(in_channels, out_channels, kernel, stride, size, groups=1):
    """A bias-free convolution with TensorFlow's 'same' padding on a `size` x `size` input;
    groups=in_channels=out_channels makes it depthwise (depth multiplier 1)."""
    before, after = tf_same_pads(size, kernel, stride)
    symmetric = before == after
    conv = nn.Conv2d(in_channels, out_channels, kernel, stride, padding=before if symmetric else 0,
                     groups=groups, bias=False)
    return conv if symmetric else nn.Sequential(nn.ZeroPad2d((before, after, before, after)), conv)


def batch_norm(channels):
    return nn.BatchNorm2d(channels, eps=1e-3, momentum=0.01)


class Residual(nn.Module):
    """relu(block(x) + shortcut(x))."""

    def __init__(self, block, shortcut):
        super().__init__()
        self.block = block
        self.shortcut = shortcut

    def forward(self, x):
        return nn.functional.relu(self.block(x) + self.shortcut(x))


def glorot_init_(model):
    """Glorot-uniform weights for every convolution and dense layer, zero biases. (For a
    depthwise kernel PyTorch's fans are Keras's swapped: their sum, hence the bound, is the same.)"""
    for module in model.modules():
        if isinstance(module, (nn.Conv2d, nn.Linear)):
            nn.init.xavier_uniform_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
    return model
