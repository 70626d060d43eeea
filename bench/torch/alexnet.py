#!/usr/bin/env python3
"""PyTorch reference for tandem's built-in 'alexnet' (src/model/builtin-models.ts): the AlexNet
shapes, one tower, on 227x227x3 images: conv 96 11x11/4 valid, maxpool 3/2, conv 256 5x5 same,
maxpool 3/2, conv 384, 384, 256 3x3 same, maxpool 3/2, FC 4096, FC 4096, FC 10 logits (all relu
but the last). Run as `python3 bench/torch/alexnet.py --help`; the runner is harness.py."""

import sys

import harness


def build_model(torch):
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(3, 96, 11, stride=4), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.Conv2d(96, 256, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.Conv2d(256, 384, 3, padding=1), nn.ReLU(),
        nn.Conv2d(384, 384, 3, padding=1), nn.ReLU(),
        nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.Flatten(),  # 256 * 6 * 6 = 9216
        nn.Linear(256 * 6 * 6, 4096), nn.ReLU(),
        nn.Linear(4096, 4096), nn.ReLU(),
        nn.Linear(4096, harness.CLASSES),
    )


if __name__ == '__main__':
    sys.exit(harness.main('alexnet', build_model, image=(3, 227, 227)))
