#!/usr/bin/env python3
"""PyTorch beside tandem's GPU check (tools/gpu-check.sh): alexnet-mini and resnet-mini (the
models of alexnet_mini.py and resnet_mini.py) trained on this machine's CUDA GPU, fp32 and bf16
autocast, with the sizes `bench gpu` uses (64 samples per step, 32x32x3 images, 10 classes; SGD
lr 0.01 momentum 0.9, cross-entropy). Steps after --warmup untimed ones, timed with
torch.cuda.synchronize() around the loop: samples/s and ms per step.

  python3 bench/torch/gpu_reference.py --out torch.json [--quick] [--steps N] [--batch B]

Writes one JSON file: {"torch": version, "device": name, "rows": [{model, precision, batch,
steps, msPerStep, samplesPerSecond}]}, or {"skipped": why} when torch has no CUDA device (exit 0:
nothing to compare against is not a failure of the check)."""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402


def build(name, torch):
    if name == 'alexnet-mini':
        import alexnet_mini
        return alexnet_mini.build_model(torch)
    import resnet_mini
    return resnet_mini.build_model(torch)


def run(torch, name, precision, batch, steps, warmup):
    dev = torch.device('cuda')
    torch.manual_seed(harness.SEED)
    model = build(name, torch).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(batch, *harness.IMAGE, device=dev)
    y = torch.randint(0, harness.CLASSES, (batch,), device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast('cuda', dtype=torch.bfloat16, enabled=precision == 'bf16-autocast'):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    return {'model': name, 'precision': precision, 'batch': batch, 'steps': steps,
            'msPerStep': 1000 * seconds / steps, 'samplesPerSecond': batch * steps / seconds}


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--out', required=True)
    p.add_argument('--quick', action='store_true', help='fewer steps (the check on software Vulkan)')
    p.add_argument('--steps', type=int)
    p.add_argument('--batch', type=int, default=64)
    args = p.parse_args()
    steps = args.steps or (5 if args.quick else 50)
    try:
        import torch
    except ImportError as exc:
        result = {'skipped': f'no torch: {exc}'}
    else:
        if not torch.cuda.is_available():
            result = {'torch': torch.__version__, 'skipped': 'torch sees no CUDA device'}
        else:
            rows = []
            for name in ('alexnet-mini', 'resnet-mini'):
                for precision in ('fp32', 'bf16-autocast'):
                    rows.append(run(torch, name, precision, args.batch, steps, warmup=5))
                    print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
            result = {'torch': torch.__version__, 'device': torch.cuda.get_device_name(0), 'rows': rows}
    with open(args.out, 'w') as f:
        json.dump(result, f, indent=2)
        f.write('\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
