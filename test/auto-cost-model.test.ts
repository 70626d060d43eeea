// --strategy auto's arithmetic, without threads: the link fit recovers α and β from synthetic timings (exact, and
// within a few percent under noise), and the schedule model's verdicts on a hand-made AlexNet-like profile — sequential
// equals compute + exchange + update + overhead; when the FC group's exchange dominates, chunked priority beats the
// ready order; a slow link makes auto pick a comm hook when compression is allowed, a fast one does not, and without
// permission it never does; the CPU ceiling: the link's CPU fit recovers cpu α and β, a hand-made calibration whose
// CPU per step exceeds the host's cores sets the prediction (CPU / cores), one well under them leaves it unchanged;
// the hooks' calibration times the group it should and its scale multiplies the hooks' compute.
import t from 'tap';
import { allReduceLinkMs, fitLink, type LinkCost } from '../src/profiling/link-fit.js';
import { pickCandidate, rankCandidates } from '../src/profiling/auto-candidates.js';
import {
  hookComputeMs,
  predictSchedule,
  predictScheduleMs,
  type Machine,
  type ScheduleSpec,
} from '../src/profiling/schedule-model.js';
import { calibrateHookScales, calibrationGroup } from '../src/profiling/hook-calibration.js';
import { measureHookCosts } from '../src/profiling/hook-costs.js';
import { allReduceWireBytes, linkCpuMs } from '../src/profiling/link-fit.js';
import { cpuShareOfHost } from '../src/profiling/cpu-ceiling.js';
import { layoutParameters } from '../src/model/parameter-layout.js';
import type { LayerCost, ModelProfile } from '../src/profiling/layer-profile.js';

t.test('fitLink recovers α and β from timed all-reduces', async t => {
  const truth: LinkCost = { alphaMs: 0.35, msPerWireByte: 8 / 1e6, ranks: 2, source: 'measured' }; // 1 Gbit/s
  const sizes = [4, 16384, 65536, 262144, 1 << 20, 1 << 22];
  const exact = fitLink(
    sizes.map(bytes => ({ bytes, ms: allReduceLinkMs(truth, bytes) })),
    2,
  );
  t.ok(Math.abs(exact.alphaMs - truth.alphaMs) < 1e-9, `α ${exact.alphaMs} = ${truth.alphaMs}`);
  t.ok(Math.abs(exact.msPerWireByte / truth.msPerWireByte - 1) < 1e-9, 'β exact');
  const wobble = [1.03, 0.97, 1.02, 0.98, 1.03, 0.97];
  const noisy = fitLink(
    sizes.map((bytes, i) => ({ bytes, ms: allReduceLinkMs(truth, bytes) * wobble[i] })),
    2,
  );
  t.ok(
    Math.abs(noisy.alphaMs / truth.alphaMs - 1) < 0.1,
    `±3% noise: α ${noisy.alphaMs.toFixed(3)} within 10% of ${truth.alphaMs}`,
  );
  t.ok(
    Math.abs(noisy.msPerWireByte / truth.msPerWireByte - 1) < 0.05,
    `±3% noise: β within 5% (${(8 / noisy.msPerWireByte / 1e6).toFixed(3)} Gbit/s)`,
  );
  const four = { alphaMs: 2, msPerWireByte: 8 / 1e5, ranks: 4, source: 'measured' as const };
  const fit4 = fitLink(
    sizes.map(bytes => ({ bytes, ms: allReduceLinkMs(four, bytes) })),
    4,
  );
  t.ok(
    Math.abs(fit4.msPerWireByte / four.msPerWireByte - 1) < 1e-9 && Math.abs(fit4.alphaMs - 2) < 1e-9,
    '4 ranks: the wire bytes are 2(N-1)/N of the buffer',
  );
  t.throws(() => fitLink([{ bytes: 4, ms: 1 }], 2), /at least 2 sizes/);
});

/**
 * AlexNet-like by hand: two small conv layers with the compute, one large FC layer with the bytes (transmission order).
 */
function handProfile(): ModelProfile {
  const layer = (
    name: string,
    className: string,
    forwardMs: number,
    backwardMs: number,
    parameters: number,
  ): LayerCost => ({ name, className, forwardMs, backwardMs, parameters, bytes: 4 * parameters, outputSize: 1 });
  const layers = [
    layer('fc2', 'Dense', 0.1, 0.2, 5130),
    layer('fc1', 'Dense', 1, 2, 2 * 1024 * 1024 + 512),
    layer('flatten', 'Flatten', 0.1, 0.1, 0),
    layer('conv2', 'Conv2D', 6, 12, 18496),
    layer('conv1', 'Conv2D', 4, 8, 896),
  ];
  const weights = [
    ['conv1/kernel', [3, 3, 3, 32]],
    ['conv1/bias', [32]],
    ['conv2/kernel', [3, 3, 32, 64]],
    ['conv2/bias', [64]],
    ['fc1/kernel', [4096, 512]],
    ['fc1/bias', [512]],
    ['fc2/kernel', [512, 10]],
    ['fc2/bias', [10]],
  ].map(([name, shape]) => ({ name: name as string, shape: shape as number[] }));
  return {
    model: 'hand',
    backend: 'none',
    batch: 32,
    layers,
    stepForwardMs: 11.2,
    stepBackwardMs: 22.3,
    overheadMs: 1,
    exchangeBytesPerMs: 1e6,
    updateBytesPerMs: 1e7,
    measuredSteps: 0,
    warmupSteps: 0,
    reps: 0,
    clock: { kind: 'thread-cpu', reason: 'by hand' },
    weights,
  };
}

const gbit = (g: number): LinkCost => ({ alphaMs: 0.1, msPerWireByte: 8 / (g * 1e6), ranks: 2, source: 'measured' });
const machine = (link: LinkCost): Machine => ({
  localDevices: 1,
  link,
  hookCosts: { encodeMsPerFloat: 2e-6, decodeMsPerFloat: 1e-6, macMs: 2e-7, passMsPerFloat: 5e-7 },
  powerSgd: { rank: 8, minCompressionRate: 2 },
});
const OPTIONS = { splitLayer: 2, bucketCapMB: 1, firstBucketMB: 0.25 };

t.test('the schedule model: sequential is compute + exchange + update + overhead', async t => {
  const profile = handProfile();
  const layout = layoutParameters(profile.weights);
  const m = machine(gbit(1));
  const ms = predictScheduleMs(
    profile,
    {
      strategy: 'sequential',
      groups: [{ name: 'all', start: 0, end: layout.total }],
      forwardWait: 'group',
      exchange: { order: 'ready' },
      hook: 'none',
    },
    m,
  );
  const bytes = layout.total * 4;
  const byHand = 11.2 + 22.3 + allReduceLinkMs(m.link!, bytes) + bytes / 1e7 + 1;
  t.ok(Math.abs(ms - byHand) < 1e-6, `${ms.toFixed(3)} ms = ${byHand.toFixed(3)} ms by hand`);
});

t.test('the candidates on the hand-made profile', async t => {
  const profile = handProfile();
  const at1g = rankCandidates(profile, machine(gbit(1)), OPTIONS, false);
  t.ok(
    at1g.every(c => c.commHook === 'none'),
    'compression not allowed: no candidate has a hook',
  );
  const best = (order: string) =>
    Math.min(
      ...at1g
        .filter(c => c.strategy === 'two-group' && c.forwardWait === 'group' && c.exchangeOrder === order)
        .map(c => c.predictedMs),
    );
  t.ok(
    best('priority') < 0.95 * best('ready'),
    `1 Gbit/s, the FC group dominates: two-group chunked priority ${best('priority').toFixed(1)} ms < ready ` +
      `${best('ready').toFixed(1)} ms`,
  );
  const pick1g = pickCandidate(at1g);
  t.equal(pick1g.exchangeOrder, 'priority', `1 Gbit/s picks ${pick1g.key} (${pick1g.predictedMs.toFixed(1)} ms)`);
  t.ok(
    at1g.every((c, i) => i === 0 || at1g[i - 1].predictedMs <= c.predictedMs),
    'ranked fastest first',
  );
  const slow = pickCandidate(rankCandidates(profile, machine(gbit(0.1)), OPTIONS, true));
  t.not(
    slow.commHook,
    'none',
    `100 Mbit/s with compression allowed picks a hook: ${slow.key} (${slow.predictedMs.toFixed(1)} ms)`,
  );
  const fast = pickCandidate(rankCandidates(profile, machine(gbit(100)), OPTIONS, true));
  t.equal(
    fast.commHook,
    'none',
    `100 Gbit/s: compute dominates, no hook pays (${fast.key}, ${fast.predictedMs.toFixed(1)} ms)`,
  );
  const emulated = pickCandidate(rankCandidates(profile, machine({ ...gbit(0.1), source: 'emulated' }), OPTIONS, true));
  t.equal(
    emulated.commHook,
    'none',
    `an emulated 100 Mbit/s link holds the full bytes' wire time whatever a hook sends: no hook (${emulated.key})`,
  );
  const slowNone = pickCandidate(rankCandidates(profile, machine(gbit(0.1)), OPTIONS, false));
  t.ok(
    slowNone.predictedMs > slow.predictedMs,
    `without permission at 100 Mbit/s: ${slowNone.key} ${slowNone.predictedMs.toFixed(1)} ms, slower than with a hook`,
  );
});

t.test('fitLink recovers the CPU per all-reduce: cpu α and cpu β', async t => {
  const truth: LinkCost = {
    alphaMs: 0.35,
    msPerWireByte: 8 / 1e6,
    ranks: 2,
    source: 'measured',
    cpuAlphaMs: 0.12,
    cpuMsPerWireByte: 1.5e-6,
  };
  const sizes = [4, 16384, 65536, 262144, 1 << 20, 1 << 22];
  const cpuOf = (bytes: number) => linkCpuMs(truth, allReduceWireBytes(bytes, 2));
  const fit = fitLink(
    sizes.map(bytes => ({ bytes, ms: allReduceLinkMs(truth, bytes), cpuMs: cpuOf(bytes) })),
    2,
  );
  t.ok(Math.abs(fit.cpuAlphaMs! - 0.12) < 1e-9, `cpu α ${fit.cpuAlphaMs} = 0.12`);
  t.ok(Math.abs(fit.cpuMsPerWireByte! / 1.5e-6 - 1) < 1e-9, `cpu β ${fit.cpuMsPerWireByte} = 1.5e-6`);
  t.ok(Math.abs(fit.alphaMs - 0.35) < 1e-9, 'the time fit is unchanged beside it');
  const wobble = [1.03, 0.97, 1.02, 0.98, 1.03, 0.97];
  const noisy = fitLink(
    sizes.map((bytes, i) => ({ bytes, ms: allReduceLinkMs(truth, bytes), cpuMs: cpuOf(bytes) * wobble[i] })),
    2,
  );
  t.ok(Math.abs(noisy.cpuMsPerWireByte! / 1.5e-6 - 1) < 0.05, `±3% noise: cpu β within 5% (${noisy.cpuMsPerWireByte})`);
  const burst = fitLink(
    sizes.map((bytes, i) => ({ bytes, ms: allReduceLinkMs(truth, bytes), cpuMs: cpuOf(bytes) + (i === 0 ? 2 : 0) })),
    2,
  );
  t.ok(
    Math.abs(burst.cpuAlphaMs! / 0.12 - 1) < 0.25,
    `a 2 ms burst of another thread at the smallest size: cpu α ${burst.cpuAlphaMs!.toFixed(3)} stays near 0.12`,
  );
  const timeOnly = fitLink(
    sizes.map(bytes => ({ bytes, ms: allReduceLinkMs(truth, bytes) })),
    2,
  );
  t.equal(timeOnly.cpuAlphaMs, undefined, 'no CPU in the samples: no CPU fit');
  t.equal(linkCpuMs(timeOnly, 1e6), 0, 'and no CPU counted for its messages');
});

t.test("the CPU ceiling: CPU per step over the host's cores, where it exceeds the simulated period", async t => {
  const link = { ...gbit(1), cpuAlphaMs: 0.2, cpuMsPerWireByte: 2e-6 };
  const layout = layoutParameters(handProfile().weights);
  // two-group by hand: the FC layers' variables (last in model order) first, chunked priority order
  const fcStart = Math.min(...layout.variables.filter(v => v.layer.startsWith('fc')).map(v => v.offset));
  const twoGroup: ScheduleSpec = {
    strategy: 'two-group',
    groups: [
      { name: 'fc', start: fcStart, end: layout.total },
      { name: 'conv', start: 0, end: fcStart },
    ],
    forwardWait: 'group',
    exchange: { order: 'priority', chunkFloats: 1 << 18 },
    hook: 'none',
  };
  const sequential: ScheduleSpec = {
    strategy: 'sequential',
    groups: [{ name: 'all', start: 0, end: layout.total }],
    forwardWait: 'group',
    exchange: { order: 'ready' },
    hook: 'none',
  };
  const shared = { ...machine(link), cpu: cpuShareOfHost(2, 2) }; // 2 cores, 2 hosts: 1 core for this host
  const uncalibrated = handProfile();
  const before = predictScheduleMs(uncalibrated, twoGroup, machine(link));
  t.equal(
    predictScheduleMs(uncalibrated, twoGroup, shared),
    before,
    'no calibrated CPU: no ceiling, the prediction unchanged',
  );

  const profile = handProfile();
  profile.calibration = { devices: 1, computeScale: 1, steadyStepMs: 34.5, cpuMsPerStep: 150 };
  const p = predictSchedule(profile, twoGroup, shared);
  const chunks = Math.ceil((layout.total - fcStart) / (1 << 18)) + Math.ceil(fcStart / (1 << 18));
  // every chunk: an all-reduce and the priority order's agreement, each a message (cpu α); the wire bytes once
  const byHand = 150 + chunks * 2 * 0.2 + 2e-6 * allReduceWireBytes(layout.total * 4, 2);
  t.ok(
    Math.abs(p.cpuMsPerStep! - byHand) < 1e-6,
    `CPU per step ${p.cpuMsPerStep!.toFixed(3)} = calibrated 150 + ${chunks} chunks' messages + wire bytes ` +
      `(${byHand.toFixed(3)} by hand)`,
  );
  t.ok(
    p.cpuBound && p.ms === p.cpuMsPerStep! / 1,
    `binds: ${p.ms.toFixed(1)} ms = CPU per step on 1 core (simulated ${p.periodMs.toFixed(1)} ms)`,
  );
  t.equal(p.periodMs, before, 'the simulated period is the prediction without the ceiling');
  const alone = predictSchedule(profile, twoGroup, { ...machine(link), cpu: cpuShareOfHost(1, 16) });
  t.ok(
    !alone.cpuBound && alone.ms === before,
    `16 cores to itself: ${alone.cpuMsPerStep!.toFixed(1)} ms CPU / 16 = ${alone.cpuCeilingMs!.toFixed(1)} ms < ` +
      `${before.toFixed(1)}: unchanged`,
  );
  const seq = predictSchedule(profile, sequential, shared);
  t.ok(
    seq.cpuMsPerStep! < p.cpuMsPerStep!,
    `sequential sends one message, fewer than two-group's chunks: ${seq.cpuMsPerStep!.toFixed(2)} < ` +
      `${p.cpuMsPerStep!.toFixed(2)} ms CPU`,
  );
  const ranked = rankCandidates(profile, shared, OPTIONS, false);
  t.ok(
    ranked.every(c => c.predictedMs >= c.cpuMsPerStep! - 1e-9),
    'every candidate is at least its CPU per step on 1 core',
  );
  t.ok(
    ranked.some(c => c.cpuBound),
    'the ceiling binds for some candidates',
  );
});

t.test("the hooks' compute calibrated on the model's gradient: the group timed, the scale applied", async t => {
  // Transmission order: a bias, a matrix too large for the cap, then more. fp16 times the bias alone (the cap);
  // PowerSGD needs a matrix it compresses, so it takes the large one too.
  const big = layoutParameters([
    { name: 'fc2/kernel', shape: [4096, 4096] },
    { name: 'fc1/kernel', shape: [8192, 4096] },
    { name: 'fc1/bias', shape: [4096] },
  ]);
  const powerSgd = { rank: 8, minCompressionRate: 2 };
  t.same(
    calibrationGroup(big, 'fp16', powerSgd),
    { name: 'calibration', start: 0, end: 4096 },
    'fp16: the first variables under the cap',
  );
  t.same(
    calibrationGroup(big, 'powersgd', powerSgd),
    { name: 'calibration', start: 0, end: 4096 + 8192 * 4096 },
    'PowerSGD: through its first compressed matrix',
  );
  const small = layoutParameters(handProfile().weights);
  t.equal(calibrationGroup(small, 'fp16', powerSgd).end, small.total, 'a model under the cap: all of it');

  const m = machine(gbit(1));
  const all = { name: 'all', start: 0, end: small.total };
  for (const hook of ['fp16', 'powersgd'] as const) {
    const plain = hookComputeMs(small, all, hook, m);
    const scaled = hookComputeMs(small, all, hook, { ...m, hookCosts: { ...m.hookCosts, scale: { [hook]: 3 } } });
    t.ok(
      plain > 0 && Math.abs(scaled / plain - 3) < 1e-9,
      `${hook}: scale 3 triples the compute (${plain.toFixed(2)} → ${scaled.toFixed(2)} ms)`,
    );
  }
  const scale = await calibrateHookScales(small, ['fp16', 'powersgd'], { ...m, hookCosts: measureHookCosts() });
  for (const hook of ['fp16', 'powersgd'] as const)
    t.ok(
      Number.isFinite(scale[hook]) && scale[hook]! > 0,
      `${hook}: measured / predicted = ${scale[hook]?.toFixed(2)}`,
    );
});
