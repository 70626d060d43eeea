#!/usr/bin/env python3
"""PyTorch reference for tandem's built-in 'mnist-node' (src/model/builtin-models.ts), the network of
tfjs-examples' mnist-node: conv3x3 32 + relu, conv3x3 32 + relu, maxpool 2x2, conv3x3 64 + relu,
conv3x3 64 + relu, maxpool 2x2 (all 'valid'), flatten, dropout 0.25, FC 512 + relu, dropout 0.5,
FC 10 logits, on 28x28x1 images. Run as `python3 bench/torch/mnist_node.py --help`; the runner is
harness.py."""

import sys

import harness


def build_model(torch):
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 32, 3), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Conv2d(32, 64, 3), nn.ReLU(), nn.Conv2d(64, 64, 3), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Flatten(),  # 64 * 4 * 4 = 1024
        nn.Dropout(0.25), nn.Linear(64 * 4 * 4, 512), nn.ReLU(), nn.Dropout(0.5),
        nn.Linear(512, harness.CLASSES),
    )


if __name__ == '__main__':
    sys.exit(harness.main('mnist-node', build_model, image=(1, 28, 28)))
