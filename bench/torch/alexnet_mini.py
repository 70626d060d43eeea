#!/usr/bin/env python3
"""PyTorch reference for tandem's built-in 'alexnet-mini' (src/model/builtin-models.ts): three
conv3x3 (padding 1) + relu + maxpool 2x2 blocks of 32/64/64 filters, FC 512 + relu, FC 10
logits. Run as `python3 bench/torch/alexnet_mini.py --help`; the runner is harness.py."""

import sys

import harness


def build_model(torch):
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Flatten(),  # 64 * 4 * 4 = 1024
        nn.Linear(64 * 4 * 4, 512), nn.ReLU(),
        nn.Linear(512, harness.CLASSES),
    )


if __name__ == '__main__':
    sys.exit(harness.main('alexnet-mini', build_model))
