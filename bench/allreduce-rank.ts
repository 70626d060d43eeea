// One rank of the all-reduce bandwidth benchmark, on its own worker thread: the shared-memory
// transport's all-reduce mean of this rank's slot, opened from the handle the main thread prepared.
import { parentPort, workerData } from 'node:worker_threads';
import { openCollective } from '../src/collectives/transport-registry.js';
import type { RankHandle } from '../src/collectives/transport.js';
import { JS_ARITHMETIC, nativeArithmetic } from '../src/optim/flat-arithmetic.js';

const { handle, arithmetic, data, length, repeats } = workerData as {
  handle: RankHandle;
  arithmetic: 'js' | 'native';
  data: SharedArrayBuffer;
  length: number;
  repeats: number;
};
const c = openCollective(handle, {
  timeoutMs: 60_000,
  isAborted: () => false,
  reducer: arithmetic === 'native' ? nativeArithmetic() : JS_ARITHMETIC,
});
const mine = new Float32Array(data, handle.rank * length * 4, length);
await c.allReduce(mine, 0, length, 'mean'); // warm-up
const t0 = performance.now();
for (let i = 0; i < repeats; i++) await c.allReduce(mine, 0, length, 'mean');
parentPort!.postMessage((performance.now() - t0) / repeats);
