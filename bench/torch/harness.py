"""The runner behind tandem's PyTorch reference models (bench/torch/<model>.py): training steps
of one model on the CPU, on synthetic data made once up front, so the timed loop holds nothing
but training steps. A model script defines build_model(torch) and calls main(name, build_model);
the loss is cross-entropy from logits, the optimizer SGD lr 0.01 momentum 0.9 (tandem's 'sgd').

  --mode single   one process: mean and median ms per step, samples/s
  --mode ddp      --procs processes (torch.multiprocessing, spawn), gloo on 127.0.0.1,
                  DistributedDataParallel, --batch samples per process per step;
                  global samples/s = procs * batch * steps / slowest process's seconds
  --mode ddp-rank one rank of a DDP job started elsewhere (one process per host): --rank R
                  --procs WORLD --init-method tcp://HOST0:PORT (GLOO_SOCKET_IFNAME picks the
                  interface); reports this rank's per-step times ("stepMs")
  --batch-norm    ddp only: 'local' (DDP's default: per-process batch statistics) or 'sync'
                  (global-batch statistics: sync_batch_norm.py, as torch 1.13's own
                  SyncBatchNorm runs on CUDA only)

The mean (msPerStep, samplesPerSecond) is the timed steps' wall time over their count, after
--warmup untimed steps; the median of the per-step times is reported beside it, and in single mode
the process's minor page faults per timed step (minorFaultsPerStep: glibc's malloc hands PyTorch's
large tensors out as fresh mmap()ed pages and unmaps them when freed, so with its default settings
every step's tensors fault their pages in again; bench/torch-reference.ts runs the script with
MALLOC_MMAP_THRESHOLD_ and MALLOC_TRIM_THRESHOLD_ set so that freed memory is kept, unless told not to), and the
glibc malloc variables it ran under (mallocEnv), and whether a 4 MiB malloc() was its own mmap() in this
process (mallocMapsFourMiB: true under glibc's defaults, false with the kept settings, null without glibc).

Human lines go to stderr; exactly one JSON line goes to stdout at the end, e.g.
  {"mode":"single","model":"alexnet-mini","torch":"1.13.0a0","threads":1,"batch":32,"steps":100,
   "trainableParameters":620362,"nonTrainableParameters":0,
   "msPerStep":70.1,"medianMsPerStep":69.8,"samplesPerSecond":456.5}
Exit status is non-zero, with a message on stderr, on any error.

Used by bench/torch-reference.ts (`npm run bench -- kernels|scaling|models`), which shows a
torch column only where `python3 -c "import torch"` works (or TANDEM_TORCH_PYTHON names
a Python that has torch). Needs only the standard library and torch (1.13 tested):

  /usr/bin/python3 bench/torch/alexnet_mini.py --mode single --steps 30
  /usr/bin/python3 bench/torch/resnet_mini.py --mode ddp --procs 2 --batch-norm sync --steps 30
"""

import argparse
import json
import os
import queue
import resource
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import traceback

SEED = 1234
DISTINCT_BATCHES = 4
CLASSES = 10
IMAGE = (3, 32, 32)  # NCHW: 32x32 pixels, 3 channels


class BenchError(Exception):
    """A failure already explained on stderr: main() prints its one-line message, no traceback."""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def limit_threads_env(threads):
    """Thread-count variables the OpenMP/MKL runtimes read when torch is first imported."""
    for name in ('OMP_NUM_THREADS', 'MKL_NUM_THREADS', 'OPENBLAS_NUM_THREADS'):
        os.environ[name] = str(threads)


def set_torch_threads(torch, threads):
    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass  # already fixed for this process: harmless for the benchmark


def count_parameters(model):
    """(trainable, non-trainable) element counts, as Keras counts them: parameters that train, then
    frozen parameters and BatchNormalization's running mean and variance (its batch counter,
    which Keras does not have, is left out)."""
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    frozen = sum(p.numel() for p in model.parameters() if not p.requires_grad)
    running = sum(b.numel() for name, b in model.named_buffers()
                  if name.rsplit('.', 1)[-1] in ('running_mean', 'running_var'))
    return trainable, frozen + running


def new_training(torch, build_model, wrap=None):
    """The seeded model in training mode (wrapped by `wrap`, e.g. in DDP), its loss, its optimizer
    (tandem's 'sgd': lr 0.01, momentum 0.9) and its parameter counts (see count_parameters)."""
    torch.manual_seed(SEED)  # same initial weights everywhere (DDP broadcasts rank 0's anyway)
    model = build_model(torch)
    counts = count_parameters(model)
    if wrap is not None:
        model = wrap(model)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return model, torch.nn.CrossEntropyLoss(), opt, counts


def make_batches(torch, batch, seed, image):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn((batch,) + image, generator=g),
             torch.randint(0, CLASSES, (batch,), generator=g))
            for _ in range(DISTINCT_BATCHES)]


def forward_loss(model, loss_fn, x, y, autocast=None):
    """The loss, under torch.autocast('cpu', dtype=autocast) when given (PyTorch's mixed-precision switch)."""
    if autocast is None:
        return loss_fn(model(x), y)
    import torch
    with torch.autocast('cpu', dtype=autocast):
        return loss_fn(model(x), y)


def train_steps(model, loss_fn, opt, batches, start, count, times=None, autocast=None):
    """Runs `count` training steps; appends each step's seconds to `times` when given."""
    for i in range(start, start + count):
        x, y = batches[i % len(batches)]
        t0 = time.perf_counter()
        loss = forward_loss(model, loss_fn, x, y, autocast)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if times is not None:
            times.append(time.perf_counter() - t0)
    return loss


# glibc's malloc settings read from the environment (mallopt(3)); reported so a run shows what it ran under
MALLOC_ENV = ('MALLOC_MMAP_THRESHOLD_', 'MALLOC_TRIM_THRESHOLD_', 'MALLOC_TOP_PAD_', 'MALLOC_MMAP_MAX_',
              'MALLOC_ARENA_MAX')


def malloc_maps_four_mib():
    """Whether glibc's malloc hands out a 4 MiB block as its own mmap() (its default threshold is 128 KiB;
    MALLOC_MMAP_THRESHOLD_ of 32 MiB keeps it in the heap): the settings seen to take effect in this process,
    where the minor-fault count cannot show it (a kernel that counts none). None without glibc's mallinfo2."""
    import ctypes
    libc = ctypes.CDLL(None)
    if not hasattr(libc, 'mallinfo2'):
        return None

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in ('arena', 'ordblks', 'smblks', 'hblks', 'hblkhd',
                                                       'usmblks', 'fsmblks', 'uordblks', 'fordblks', 'keepcost')]
    libc.mallinfo2.restype = MallInfo2
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    before = libc.mallinfo2().hblks
    block = libc.malloc(4 << 20)
    mapped = libc.mallinfo2().hblks > before
    libc.free(block)
    return mapped


def base_result(args, torch, counts):
    """The fields every result has: what ran and the model's parameter counts."""
    return {
        'mode': args.mode, 'model': args.model, 'torch': torch.__version__, 'threads': args.threads,
        'batch': args.batch, 'steps': args.steps,
        'trainableParameters': counts[0], 'nonTrainableParameters': counts[1],
    }


def run_single(args, build_model):
    maps_four_mib = malloc_maps_four_mib()  # before torch: nothing freed yet has raised glibc's threshold
    limit_threads_env(args.threads)
    import torch
    set_torch_threads(torch, args.threads)
    model, loss_fn, opt, counts = new_training(torch, build_model)
    batches = make_batches(torch, args.batch, SEED + 1, args.image)
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
        batches = [(x.to(memory_format=torch.channels_last), y) for x, y in batches]
    autocast = torch.bfloat16 if args.precision == 'bf16' else None
    log(f'torch {torch.__version__}: {args.model}, single process, {torch.get_num_threads()} thread(s), '
        f'batch {args.batch}, {args.precision}{" channels_last" if args.channels_last else ""}, '
        f'{args.warmup} warm-up + {args.steps} timed steps')

    train_steps(model, loss_fn, opt, batches, 0, args.warmup, autocast=autocast)
    times = []
    faults0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t0 = time.perf_counter()
    loss = train_steps(model, loss_fn, opt, batches, args.warmup, args.steps, times, autocast)
    elapsed = time.perf_counter() - t0
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults0
    if not torch.isfinite(loss).item():
        raise RuntimeError(f'loss is not finite after training: {loss.item()}')

    result = base_result(args, torch, counts)
    result.update({
        'msPerStep': round(elapsed * 1000 / args.steps, 3),
        'medianMsPerStep': round(statistics.median(times) * 1000, 3),
        'samplesPerSecond': round(args.batch * args.steps / elapsed, 2),
        'precision': args.precision, 'channelsLast': args.channels_last,
        'minorFaultsPerStep': round(faults / args.steps, 1),
        'mallocEnv': {k: v for k, v in os.environ.items() if k in MALLOC_ENV},
        'mallocMapsFourMiB': maps_four_mib,
    })
    log(f'single: {result["msPerStep"]} ms/step (median {result["medianMsPerStep"]}), '
        f'{result["samplesPerSecond"]} samples/s, final loss {loss.item():.4f}')
    return result


def exit_with_parent():
    """A rank whose parent died (SIGKILL, say) exits instead of training on as an orphan."""
    parent = os.getppid()

    def watch():
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(1)
    threading.Thread(target=watch, name='parent-watch', daemon=True).start()


def ddp_train(rank, world, init_method, args, build_model):
    """Joins the gloo process group as `rank` of `world` and trains this rank's steps under
    DistributedDataParallel; returns its timings, final loss, threads and parameter counts."""
    limit_threads_env(args.threads)
    import datetime
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    set_torch_threads(torch, args.threads)
    dist.init_process_group('gloo', init_method=init_method, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=args.collective_timeout))
    try:
        if args.batch_norm == 'sync':
            from sync_batch_norm import convert_sync_batch_norm
            bn_group = dist.new_group(list(range(world)))  # its own ordering, apart from DDP's buckets
            wrap = lambda m: DDP(convert_sync_batch_norm(m, bn_group))  # noqa: E731
        else:
            wrap = DDP
        model, loss_fn, opt, counts = new_training(torch, build_model, wrap)
        batches = make_batches(torch, args.batch, SEED + 1 + rank, args.image)  # each rank its own shard

        train_steps(model, loss_fn, opt, batches, 0, args.warmup)
        dist.barrier()
        times = []
        t0 = time.perf_counter()
        loss = train_steps(model, loss_fn, opt, batches, args.warmup, args.steps, times)
        elapsed = time.perf_counter() - t0
        dist.barrier()
        if not torch.isfinite(loss).item():
            raise RuntimeError(f'rank {rank}: loss is not finite: {loss.item()}')
        return {'elapsed': elapsed, 'times': times, 'loss': loss.item(),
                'threads': torch.get_num_threads(), 'counts': counts, 'torch': torch.__version__}
    finally:
        dist.destroy_process_group()


def ddp_worker(rank, world, init_method, args, results, build_model):
    """One DDP rank (a spawned process). Reports ('ok'|'error', rank, payload) on `results`."""
    try:
        exit_with_parent()
        os.dup2(2, 1)  # keep stdout for the parent's single JSON line
        sys.stdout = sys.stderr
        results.put(('ok', rank, ddp_train(rank, world, init_method, args, build_model)))
    except BaseException:  # report everything, including KeyboardInterrupt, then fail the process
        try:
            results.put(('error', rank, traceback.format_exc()))
            results.close()
            results.join_thread()  # the report must leave before os._exit
        finally:
            sys.stderr.flush()
            os._exit(1)


def run_ddp_rank(args, build_model):
    """One rank of a DDP job whose ranks were started elsewhere (one per host): joins the group at
    --init-method (tcp://host0:port) as --rank of --world in this process. GLOO_SOCKET_IFNAME, when
    set, names the interface gloo uses. Reports this rank's per-step times (ms)."""
    if args.init_method is None or args.rank is None:
        raise BenchError('--mode ddp-rank needs --init-method tcp://HOST:PORT and --rank R')
    if not 0 <= args.rank < args.procs:
        raise BenchError(f'--rank {args.rank} is not in 0..{args.procs - 1} (--procs {args.procs})')
    log(f'{args.model}: ddp rank {args.rank} of {args.procs} at {args.init_method} '
        f'(GLOO_SOCKET_IFNAME={os.environ.get("GLOO_SOCKET_IFNAME", "unset")}), {args.threads} thread(s), '
        f'batch {args.batch}, {args.warmup} warm-up + {args.steps} timed steps')
    rep = ddp_train(args.rank, args.procs, args.init_method, args, build_model)
    result = {
        'mode': args.mode, 'model': args.model, 'torch': rep['torch'], 'threads': rep['threads'],
        'batch': args.batch, 'steps': args.steps, 'procs': args.procs, 'rank': args.rank, 'batchNorm': args.batch_norm,
        'trainableParameters': rep['counts'][0], 'nonTrainableParameters': rep['counts'][1],
        'stepMs': [round(t * 1000, 3) for t in rep['times']],
        'msPerStep': round(rep['elapsed'] * 1000 / args.steps, 3),
        'medianMsPerStep': round(statistics.median(rep['times']) * 1000, 3),
        'samplesPerSecond': round(args.procs * args.batch * args.steps / rep['elapsed'], 2),
    }
    log(f'ddp rank {args.rank}: {result["msPerStep"]} ms/step (median {result["medianMsPerStep"]}), final loss {rep["loss"]:.4f}')
    return result


def run_ddp(args, build_model):
    limit_threads_env(args.threads)  # inherited by the spawned ranks before they import torch
    os.environ.setdefault('GLOO_SOCKET_IFNAME', 'lo')  # gloo traffic stays on the loopback (127.0.0.1)
    import torch
    import torch.multiprocessing as mp

    def on_signal(signum, _frame):  # so the finally below still stops the ranks
        raise BenchError(f'terminated by signal {signum}')
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    world = args.procs
    tmp = tempfile.mkdtemp(prefix='tandem-torch-ddp-')
    init_method = 'file://' + os.path.join(tmp, 'rendezvous')  # no port to race for
    ctx = mp.get_context('spawn')
    results = ctx.Queue()
    log(f'torch {torch.__version__}: {args.model}, ddp, {world} processes (gloo, loopback), '
        f'{args.batch_norm} batch norm, {args.threads} thread(s) each, batch {args.batch} per process, '
        f'{args.warmup} warm-up + {args.steps} timed steps')
    procs = [ctx.Process(target=ddp_worker, args=(rank, world, init_method, args, results, build_model),
                         name=f'ddp-rank-{rank}', daemon=True)
             for rank in range(world)]
    reports = {}
    error = None
    try:
        for p in procs:
            p.start()
        deadline = time.monotonic() + args.timeout
        while len(reports) < world and error is None:
            try:
                status, rank, payload = results.get(timeout=0.5)
            except queue.Empty:
                dead = [p for p in procs if p.exitcode is not None and p.exitcode != 0]
                if dead:
                    # a rank died without reporting (killed, crashed in C++): drain once, then fail
                    try:
                        status, rank, payload = results.get(timeout=1.0)
                    except queue.Empty:
                        error = ', '.join(f'{p.name} exited with code {p.exitcode}' for p in dead)
                        break
                elif time.monotonic() > deadline:
                    error = f'timed out after {args.timeout} s ({len(reports)}/{world} ranks finished)'
                    break
                else:
                    continue
            if status == 'ok':
                reports[rank] = payload
            else:
                log(f'rank {rank} failed:\n{payload.rstrip()}')
                last = payload.strip().splitlines()[-1] if payload.strip() else 'no traceback'
                error = f'rank {rank} failed: {last}'
        if error is None:
            for p in procs:
                p.join(timeout=max(5.0, deadline - time.monotonic()))
            bad = [p for p in procs if p.exitcode != 0]
            if bad:
                error = ', '.join(f'{p.name} exited with code {p.exitcode}' for p in bad)
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
        results.close()
        results.join_thread()
        shutil.rmtree(tmp, ignore_errors=True)
    if error is not None:
        raise BenchError(f'ddp run failed: {error}')

    slowest = max(r['elapsed'] for r in reports.values())
    # a step is as slow as its slowest rank
    step_max = [max(reports[r]['times'][i] for r in reports) for i in range(args.steps)]
    result = base_result(args, torch, reports[0]['counts'])
    result.update({
        'procs': world, 'batchNorm': args.batch_norm,
        'msPerStep': round(slowest * 1000 / args.steps, 3),
        'medianMsPerStep': round(statistics.median(step_max) * 1000, 3),
        'samplesPerSecond': round(world * args.batch * args.steps / slowest, 2),
    })
    for r in sorted(reports):
        rep = reports[r]
        log(f'  rank {r}: {rep["elapsed"]:.3f} s, {rep["threads"]} thread(s), final loss {rep["loss"]:.4f}')
    log(f'ddp: {result["msPerStep"]} ms/step (median {result["medianMsPerStep"]}), '
        f'{result["samplesPerSecond"]} samples/s global')
    return result


def positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f'must be >= 1, got {value}')
    return value


def non_negative_int(text):
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f'must be >= 0, got {value}')
    return value


def parse_args(model, argv, image=IMAGE):
    p = argparse.ArgumentParser(description=f'PyTorch {model} reference benchmark (CPU).')
    p.add_argument('--mode', choices=('single', 'ddp', 'ddp-rank'), default='single')
    p.add_argument('--batch', type=positive_int, default=32, help='samples per process per step')
    p.add_argument('--steps', type=positive_int, default=100, help='timed steps')
    p.add_argument('--warmup', type=non_negative_int, default=10, help='untimed steps first')
    p.add_argument('--threads', type=positive_int, default=1, help='torch threads per process')
    p.add_argument('--procs', type=positive_int, default=2, help='processes (ddp), the world size (ddp-rank)')
    p.add_argument('--rank', type=non_negative_int, help='ddp-rank: this process\'s rank')
    p.add_argument('--init-method', help='ddp-rank: where the ranks meet, tcp://HOST0:PORT')
    p.add_argument('--batch-norm', choices=('local', 'sync'), default='local',
                   help='ddp: per-process batch statistics (DDP\'s default) or global-batch ones')
    p.add_argument('--precision', choices=('fp32', 'bf16'), default='fp32',
                   help="single: bf16 runs forward and loss under torch.autocast('cpu', dtype=torch.bfloat16)")
    p.add_argument('--channels-last', action='store_true', help='single: model and inputs in channels_last')
    p.add_argument('--timeout', type=float, default=300.0,
                   help='ddp: seconds before the ranks are killed and the run fails')
    p.add_argument('--collective-timeout', type=float, default=120.0,
                   help='ddp: gloo timeout, so a rank waiting on a dead peer gives up')
    args = p.parse_args(argv)
    args.model = model
    args.image = image
    return args


def main(model, build_model, argv=None, image=IMAGE):
    """The entry point of a model script: `model` is tandem's name for it, `build_model(torch)`
    returns a new nn.Module taking NCHW `image` (default 3x32x32) images to CLASSES logits."""
    args = parse_args(model, sys.argv[1:] if argv is None else argv, image)
    try:
        run = {'single': run_single, 'ddp': run_ddp, 'ddp-rank': run_ddp_rank}[args.mode]
        result = run(args, build_model)
    except Exception as exc:  # one clear line at the end; a traceback above it if unexpected
        if not isinstance(exc, BenchError):
            traceback.print_exc(file=sys.stderr)
        log(f'{os.path.basename(sys.argv[0])}: error: {exc}')
        return 1
    sys.stdout.write(json.dumps(result, separators=(',', ':')) + '\n')
    sys.stdout.flush()
    return 0
