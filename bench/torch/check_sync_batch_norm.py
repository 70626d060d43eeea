#!/usr/bin/env python3
"""Checks sync_batch_norm.py: DDP over 2 gloo processes with SyncBatchNorm2d, each on half of
a batch, gives the gradients and running statistics that one process gives on the whole batch
(within 1e-5), for resnet-mini and mobilenet-mini. Prints one line per model; exit 1 on a
mismatch.   /usr/bin/python3 bench/torch/check_sync_batch_norm.py
"""
import os
import sys
import tempfile

import harness
import mobilenet_mini
import resnet_mini

WORLD = 2
BATCH = 8  # per process
TOLERANCE = 1e-5


def step(torch, model, x, y):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    return loss


def reference(torch, build_model, x, y):
    torch.manual_seed(harness.SEED)
    model = build_model(torch)
    step(torch, model, x, y)
    return model


def worst_difference(reference_model, module):
    grads = max((a.grad - b.grad).abs().max().item()
                for a, b in zip(reference_model.parameters(), module.parameters()))
    stats = max((a - b).abs().max().item()
                for (name, a), (_, b) in zip(reference_model.named_buffers(), module.named_buffers())
                if name.endswith(('running_mean', 'running_var')))
    return grads, stats


def rank_main(rank, init_method, failures):
    import torch
    harness.set_torch_threads(torch, 1)
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from sync_batch_norm import convert_sync_batch_norm
    dist.init_process_group('gloo', init_method=init_method, rank=rank, world_size=WORLD)
    group = dist.new_group(list(range(WORLD)))
    for name, build_model in (('resnet-mini', resnet_mini.build_model), ('mobilenet-mini', mobilenet_mini.build_model)):
        g = torch.Generator().manual_seed(7)
        x, y = torch.randn(WORLD * BATCH, 3, 32, 32, generator=g), torch.randint(0, 10, (WORLD * BATCH,), generator=g)
        torch.manual_seed(harness.SEED)
        model = DDP(convert_sync_batch_norm(build_model(torch), group))
        mine = slice(rank * BATCH, (rank + 1) * BATCH)
        step(torch, model, x[mine], y[mine])
        if rank == 0:
            grads, stats = worst_difference(reference(torch, build_model, x, y), model.module)
            ok = grads <= TOLERANCE and stats <= TOLERANCE
            print(f'{name}: 2 processes x {BATCH} (sync BN) against 1 x {WORLD * BATCH}: '
                  f'max |gradient difference| {grads:.2e}, max |running statistics difference| {stats:.2e}: '
                  f'{"ok" if ok else "MISMATCH"} (tolerance {TOLERANCE})', flush=True)
            failures.value += 0 if ok else 1
    dist.destroy_process_group()


def main():
    harness.limit_threads_env(1)
    os.environ.setdefault('GLOO_SOCKET_IFNAME', 'lo')
    import torch.multiprocessing as mp
    with tempfile.TemporaryDirectory(prefix='tandem-sync-bn-') as tmp:
        failures = mp.get_context('spawn').Value('i', 0)
        mp.spawn(rank_main, args=('file://' + os.path.join(tmp, 'rendezvous'), failures), nprocs=WORLD)
    return 1 if failures.value else 0


if __name__ == '__main__':
    sys.exit(main())
