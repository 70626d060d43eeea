/**
 * `npm run bench -- scaling|kernels|precision|precision-accuracy|overlap|profile|profile-clock|classifier|faults|
 * elastic|soak|models|hosts|hosts-repeat A.json B.json|hosts-timelines|hosts-allreduce|hosts-line-rate|comm-hooks|
 * half-passes|chunk-size|shm-vs-loopback|data|gpu|watch|fit|startup|onednn-share [--gpus 1,2] [--image-size S]
 * [--steps N] [--runs N] [--busy N] [--classes 1000,10000] [--models a,b] [--stock-steps N] [--batch N]
 * [--links none,1gbps,…] [--rates 10gbit,1gbit,100mbit] [--pin] [--out DIR]`
 */
import { parseArgs } from 'node:util';
import { runScaling } from './scaling.js';
import { runOverlap } from './overlap.js';
import { runProfileBench } from './profile.js';
import { runProfileClockBench } from './profile-clock.js';
import { runClassifierBench } from './classifier.js';
import { runFaultMatrix } from './faults.js';
import { runSoak } from './soak.js';
import { runKernelBench } from './kernels.js';
import { runModelsBench } from './models.js';
import { runHostsAllReduceBench } from './hosts-allreduce.js';
import { runCommHooksBench } from './comm-hooks.js';
import { runHostsBench } from './hosts.js';
import { runHostsTimelines } from './hosts-timelines.js';
import { runHostsRepeat } from './hosts-repeat.js';
import { parseHostsOptions } from './hosts-figures.js';
import { runChunkSizeBench } from './chunk-size.js';
import { runWatchBench, VARIANTS, type Variant } from './watch.js';
import { runHalfPassesBench } from './half-passes.js';
import { runShmVsLoopbackBench } from './shm-vs-loopback.js';
import { runHostsLineRateBench, DEFAULT_LINE_RATE_METHODS, type SecretMode } from './hosts-line-rate.js';
import type { LineRateMethod } from './hosts-line-rate-host.js';
import { runPrecisionBench } from './precision.js';
import { runOnednnShareBench } from './onednn-share.js';
import { runFitBench } from './fit.js';
import { runStartupBench } from './startup.js';
import { runPrecisionAccuracy } from './precision-accuracy.js';
import { runGpuBench, GPU_BENCH_DEFAULTS, GPU_BENCH_MODELS, GPU_BENCH_QUICK } from './gpu.js';

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: {
    classes: { type: 'string' },
    floats: { type: 'string' },
    models: { type: 'string' },
    links: { type: 'string' },
    rates: { type: 'string' },
    steps: { type: 'string' },
    'stock-steps': { type: 'string' },
    batch: { type: 'string' },
    out: { type: 'string' },
    runs: { type: 'string' },
    busy: { type: 'string' },
    schedules: { type: 'string' },
    hooks: { type: 'string' },
    quick: { type: 'boolean' },
    methods: { type: 'string' },
    megabytes: { type: 'string' },
    repeats: { type: 'string' },
    gpus: { type: 'string' },
    'image-size': { type: 'string' },
    secret: { type: 'string' }, // hosts-line-rate and hosts: with|without|both
    variants: { type: 'string' }, // watch: plain,tensorboard,dashboard,watched
    model: { type: 'string' }, // watch
    devices: { type: 'string' }, // watch
    backend: { type: 'string' }, // watch
    warmup: { type: 'string' }, // watch
    pin: { type: 'boolean' }, // precision, onednn-share
    help: { type: 'boolean', short: 'h' },
  },
});
const BENCHES =
  'scaling, kernels, overlap, profile, profile-clock, classifier, faults, elastic, soak, models, hosts, ' +
  'hosts-repeat, hosts-timelines, hosts-allreduce, comm-hooks, half-passes, chunk-size, shm-vs-loopback, ' +
  'hosts-line-rate, gpu, watch, fit, startup, data, precision, precision-accuracy, onednn-share';
const name = values.help ? 'help' : (positionals[0] ?? 'scaling');
switch (name) {
  case 'help':
    console.log(
      'usage: npm run bench -- BENCH [options]   (docs/benchmarks.md: what each measures, and its last results)\n' +
        `benches: ${BENCHES}\n` +
        'options (each bench reads the ones it uses): --steps N --batch N --runs N --models a,b --out DIR ' +
        '(bench/results) --quick, and per bench --links, --rates, --classes, --gpus, --image-size, --variants',
    );
    break;
  case 'scaling':
    await runScaling({
      steps: Number(values.steps ?? 100),
      stockSteps: Number(values['stock-steps'] ?? 1),
      perDeviceBatch: Number(values.batch ?? 32),
      out: values.out ?? 'bench/results',
      runs: Number(values.runs ?? 3),
    });
    break;
  case 'kernels':
    await runKernelBench({
      steps: Number(values.steps ?? 100),
      batch: Number(values.batch ?? 32),
      out: values.out ?? 'bench/results',
    });
    break;
  case 'overlap':
    await runOverlap({
      steps: Number(values.steps ?? 30),
      perDeviceBatch: Number(values.batch ?? 32),
      links: (values.links ?? 'none,10gbps,1gbps,100mbps').split(','),
      out: values.out ?? 'bench/results',
    });
    break;
  case 'profile':
    await runProfileBench({
      steps: Number(values.steps ?? 20),
      perDeviceBatch: Number(values.batch ?? 32),
      links: (values.links ?? 'none,1gbps,100mbps').split(','),
      models: (values.models ?? 'alexnet-mini,convnet-gap').split(','),
      out: values.out ?? 'bench/results',
    });
    break;
  case 'profile-clock':
    await runProfileClockBench({
      models: (values.models ?? 'alexnet-mini').split(','),
      runs: Number(values.runs ?? 3),
      busy: Number(values.busy ?? 0),
      perDeviceBatch: Number(values.batch ?? 32),
      out: values.out ?? 'bench/results',
    });
    break;
  case 'classifier':
    await runClassifierBench({
      classes: (values.classes ?? '1000,10000,100000').split(',').map(Number),
      steps: Number(values.steps ?? 100),
      batch: Number(values.batch ?? 128),
      out: values.out ?? 'bench/results',
    });
    break;
  case 'comm-hooks':
    await runCommHooksBench({
      steps: Number(values.steps ?? 300),
      batch: Number(values.batch ?? 64),
      devices: 2,
      out: values.out ?? 'bench/results',
    });
    break;
  case 'half-passes':
    runHalfPassesBench({
      runs: Number(values.runs ?? 9),
      floats: Number(values.floats ?? 586_000),
      out: values.out ?? 'bench/results',
    });
    break;
  case 'precision':
    await runPrecisionBench({
      models: (values.models ?? 'alexnet-mini,resnet-mini,mnist-node').split(','),
      steps: Number(values.steps ?? 300),
      perDeviceBatch: Number(values.batch ?? 32),
      repeats: Number(values.repeats ?? 3),
      pin: values.pin ?? false,
      out: values.out ?? 'bench/results',
    });
    break;
  case 'onednn-share':
    await runOnednnShareBench({
      models: (values.models ?? 'alexnet-mini,resnet-mini,mnist-node').split(','),
      steps: Number(values.steps ?? 400),
      repeats: Number(values.repeats ?? 3),
      pin: values.pin ?? false,
      out: values.out ?? 'bench/results',
    });
    break;
  case 'precision-accuracy':
    await runPrecisionAccuracy({ out: values.out ?? 'bench/results', quick: values.quick ?? false });
    break;
  case 'models':
    await runModelsBench({
      steps: Number(values.steps ?? 30),
      perDeviceBatch: Number(values.batch ?? 16),
      out: values.out ?? 'bench/results',
    });
    break;
  case 'chunk-size':
    await runChunkSizeBench({ runs: Number(values.runs ?? 10), out: values.out ?? 'bench/results' });
    break;
  case 'shm-vs-loopback':
    await runShmVsLoopbackBench({
      runs: values.runs === undefined ? undefined : Number(values.runs),
      out: values.out ?? 'bench/results',
    });
    break;
  case 'hosts-allreduce':
    await runHostsAllReduceBench({
      hosts: 2,
      local: 2,
      megabytes: [4, 32],
      repeats: Number(values.runs ?? 20),
      out: values.out ?? 'bench/results',
    });
    break;
  case 'hosts-line-rate':
    await runHostsLineRateBench({
      rates: (values.rates ?? '1gbit,100mbit').split(',') as never,
      megabytes: (values.megabytes ?? '2.345,23.45').split(',').map(Number),
      methods: (values.methods?.split(',') as LineRateMethod[] | undefined) ?? DEFAULT_LINE_RATE_METHODS,
      repeats: Number(values.repeats ?? 5),
      runs: Number(values.runs ?? 3),
      // --secret with|without|both: the gloo methods' runs with the job secret, without it, or both, interleaved
      secret: values.secret === undefined || values.secret === 'both' ? undefined : [values.secret as SecretMode],
      out: values.out ?? 'bench/results',
    });
    break;
  case 'startup':
    await runStartupBench({ runs: Number(values.runs ?? 5), out: values.out ?? 'bench/results' });
    break;
  case 'fit':
    await runFitBench({
      models: (values.models ?? 'alexnet-mini').split(','),
      steps: Number(values.steps ?? 40),
      batch: Number(values.batch ?? 64),
      runs: Number(values.runs ?? 3),
      tfjsSteps: Number(values['stock-steps'] ?? 4),
      out: values.out ?? 'bench/results',
    });
    break;
  case 'hosts':
    await runHostsBench(parseHostsOptions(values));
    break;
  case 'hosts-repeat':
    if (positionals.length !== 3)
      throw new Error(
        'usage: npm run bench -- hosts-repeat FIRST.json SECOND.json (two runs of `npm run bench -- hosts`)',
      );
    runHostsRepeat(positionals[1], positionals[2]);
    break;
  case 'hosts-timelines':
    runHostsTimelines({
      models: (values.models ?? 'alexnet-mini').split(','),
      links: (values.links ?? values.rates ?? '1G,100M').split(','),
      schedules: (values.schedules ?? 'sequential-none,two-group-seed-none,two-group-priority-none').split(','),
      out: values.out ?? 'docs',
    });
    break;
  case 'data': {
    // Imported here: it loads jpeg-js (a dev dependency), which the GPU bundle that runs this file does not carry.
    const { runDataBench, DATA_BENCH_DEFAULTS, DATA_BENCH_QUICK } = await import('./data.js');
    const sizes = values.quick ? DATA_BENCH_QUICK : DATA_BENCH_DEFAULTS;
    await runDataBench({
      images: sizes.images,
      rows: sizes.rows,
      steps: Number(values.steps ?? sizes.steps),
      batch: Number(values.batch ?? sizes.batch),
      imageSize: Number(values['image-size'] ?? sizes.imageSize),
      models: values.models?.split(',') ?? ['alexnet-mini', 'mnist-node'],
      out: values.out ?? 'bench/results',
    });
    break;
  }
  case 'gpu': {
    const sizes = values.quick ? GPU_BENCH_QUICK : GPU_BENCH_DEFAULTS;
    await runGpuBench({
      gpus: values.gpus?.split(',').map(Number),
      models: values.models?.split(',') ?? GPU_BENCH_MODELS,
      steps: Number(values.steps ?? sizes.steps),
      batch: Number(values.batch ?? sizes.batch),
      imageSize: Number(values['image-size'] ?? sizes.imageSize),
      out: values.out ?? 'bench/results',
    });
    break;
  }
  case 'soak':
    await runSoak(Number(values.steps ?? 2000), values.out ?? 'bench/results');
    break;
  case 'faults':
    await runFaultMatrix(values.out ?? 'bench/results', 2000);
    break;
  case 'elastic': {
    // Imported here: it loads the tests' host fixtures, which the GPU bundle that runs this file does not carry.
    const { runElasticBench } = await import('./elastic.js');
    await runElasticBench({
      rates: (values.rates ?? '1gbit').split(','),
      steps: Number(values.steps ?? 120),
      out: values.out ?? 'bench/results',
    });
    break;
  }
  case 'watch':
    await runWatchBench({
      variants: values.variants?.split(',').map(v => {
        if (!(VARIANTS as readonly string[]).includes(v))
          throw new RangeError(`bench watch: --variants takes ${VARIANTS.join(', ')}, got '${v}'`);
        return v as Variant;
      }),
      model: values.model ?? 'alexnet-mini',
      devices: Number(values.devices ?? 1),
      backend: values.backend ?? 'native',
      steps: Number(values.steps ?? 200),
      warmup: Number(values.warmup ?? 20),
      runs: Number(values.runs ?? 4),
      batch: Number(values.batch ?? 32),
      out: values.out ?? 'bench/results',
    });
    break;
  default:
    console.error(`unknown bench '${name}'. Benches: ${BENCHES} (npm run bench -- --help)`);
    process.exitCode = 1;
}
