// One rank of the chunk-size benchmark, on its own worker thread: a group's all-reduce mean through the shared-memory
// transport in chunks of `chunkFloats` (as the priority exchange runs it), each chunk followed by the one-float
// readiness agreement (an all-gather) when `agree` is set — what the priority exchange pays while a group is not
// agreed.
import { parentPort, workerData } from 'node:worker_threads';
import { openCollective } from '../src/collectives/transport-registry.js';
import type { RankHandle } from '../src/collectives/transport.js';
import { nativeArithmetic, JS_ARITHMETIC } from '../src/optim/flat-arithmetic.js';
import { loadNativeAddon } from '../src/engine/native/native-addon.js';

const { handle, data, length, chunkFloats, agree, repeats } = workerData as {
  handle: RankHandle;
  data: SharedArrayBuffer;
  length: number;
  chunkFloats: number;
  agree: boolean;
  repeats: number;
};
const c = openCollective(handle, {
  timeoutMs: 60_000,
  isAborted: () => false,
  reducer: loadNativeAddon().loaded ? nativeArithmetic() : JS_ARITHMETIC,
});
const mine = new Float32Array(data, handle.rank * length * 4, length);
const one = new Float32Array(1),
  all = new Float32Array(handle.size);
const once = async () => {
  for (let start = 0; start < length; start += chunkFloats) {
    await c.allReduce(mine, start, Math.min(length, start + chunkFloats), 'mean');
    if (agree) await c.allGather(one, all);
  }
};
await once(); // warm-up
const t0 = performance.now();
for (let i = 0; i < repeats; i++) await once();
parentPort!.postMessage((performance.now() - t0) / repeats);
c.close();
