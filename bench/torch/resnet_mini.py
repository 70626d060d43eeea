#!/usr/bin/env python3
"""PyTorch reference for tandem's built-in 'resnet-mini' (src/model/builtin-models.ts), on
32x32x3 images: a conv3x3 stem (16) + BN + relu, two residual blocks (conv3x3-BN-relu-conv3x3-BN
plus the shortcut, then relu: 16 filters stride 1 with the identity shortcut, then 32 filters
stride 2 with a conv1x1 stride 2 + BN shortcut), global average pooling, dense 10 logits.
Convolutions have no bias; padding and BatchNormalization are tfjs's (keras_layers.py).
Run as `python3 bench/torch/resnet_mini.py --help`; the runner is harness.py."""

import sys

import harness

SIZE = 32


def residual_block(in_channels, filters, stride, size):
    from torch import nn
    from keras_layers import Residual, batch_norm, conv_same
    block = nn.Sequential(
        conv_same(in_channels, filters, 3, stride, size), batch_norm(filters), nn.ReLU(),
        conv_same(filters, filters, 3, 1, size // stride), batch_norm(filters),
    )
    shortcut = nn.Identity() if stride == 1 else nn.Sequential(
        nn.Conv2d(in_channels, filters, 1, stride, bias=False), batch_norm(filters))  # 'valid', as tfjs's default
    return Residual(block, shortcut)


def build_model(torch):
    nn = torch.nn
    from keras_layers import batch_norm, conv_same, glorot_init_
    return glorot_init_(nn.Sequential(
        conv_same(3, 16, 3, 1, SIZE), batch_norm(16), nn.ReLU(),
        residual_block(16, 16, 1, SIZE),
        residual_block(16, 32, 2, SIZE),  # -> 16x16x32
        nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(32, harness.CLASSES),
    ))


if __name__ == '__main__':
    sys.exit(harness.main('resnet-mini', build_model))
