// One rank of the all-reduce bandwidth benchmark, on its own worker thread.
import { parentPort, workerData } from 'node:worker_threads';
import { ControlBlock } from '../src/actors/control-block.js';
import { SharedMemoryCollective } from '../src/collectives/shared-memory-collective.js';
import type { AllReduceKind } from '../src/collectives/collective.js';
import { JS_ARITHMETIC, nativeArithmetic } from '../src/optim/flat-arithmetic.js';

const { rank, size, kind, arithmetic, control, data, length, repeats } = workerData as {
  rank: number; size: number; kind: AllReduceKind; arithmetic: 'js' | 'native'; control: SharedArrayBuffer; data: SharedArrayBuffer; length: number; repeats: number;
};
const block = new ControlBlock(control, size, 1, 60_000);
const slots = Array.from({ length: size }, (_, r) => new Float32Array(data, r * length * 4, length));
const c = new SharedMemoryCollective(kind, rank, size, block, arithmetic === 'native' ? nativeArithmetic() : JS_ARITHMETIC);
await c.allReduceMean(slots, 0, length); // warm-up
const t0 = performance.now();
for (let i = 0; i < repeats; i++) await c.allReduceMean(slots, 0, length);
parentPort!.postMessage((performance.now() - t0) / repeats);
