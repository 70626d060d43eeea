#!/usr/bin/env python3
"""PyTorch reference for tandem's built-in 'mobilenet-mini' (src/model/builtin-models.ts), on
32x32x3 images: a conv3x3 stride 2 stem (16) + BN + relu6, three depthwise-separable blocks
(depthwise conv3x3 - BN - relu6 - pointwise conv1x1 - BN - relu6: 32 filters stride 1, 64
stride 2, 64 stride 1), global average pooling, dense 10 logits. Convolutions have no bias;
padding and BatchNormalization are tfjs's (keras_layers.py).
Run as `python3 bench/torch/mobilenet_mini.py --help`; the runner is harness.py."""

import sys

import harness

SIZE = 32


def bn_relu6(channels):
    from torch import nn
    from keras_layers import batch_norm
    return [batch_norm(channels), nn.ReLU6()]


def separable(in_channels, filters, stride, size):
    from torch import nn
    from keras_layers import conv_same
    return [
        conv_same(in_channels, in_channels, 3, stride, size, groups=in_channels), *bn_relu6(in_channels),
        nn.Conv2d(in_channels, filters, 1, bias=False), *bn_relu6(filters),  # 'valid', as tfjs's default
    ]


def build_model(torch):
    nn = torch.nn
    from keras_layers import conv_same, glorot_init_
    return glorot_init_(nn.Sequential(
        conv_same(3, 16, 3, 2, SIZE), *bn_relu6(16),  # -> 16x16
        *separable(16, 32, 1, SIZE // 2),
        *separable(32, 64, 2, SIZE // 2),  # -> 8x8
        *separable(64, 64, 1, SIZE // 4),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(64, harness.CLASSES),
    ))


if __name__ == '__main__':
    sys.exit(harness.main('mobilenet-mini', build_model))
