// The scaling bench's measurements beside the training runs: stock tfjs `model.fit`, the all-reduce alone on
// shared memory, and a plain memory copy. The runs and the table: scaling.ts.
import { Worker } from 'node:worker_threads';
import { once } from 'node:events';

import { SHARED_MEMORY_TRANSPORT } from '../src/collectives/shared-memory-transport.js';

/** Stock tfjs `model.fit` of alexnet-mini on the cpu backend, one thread: samples per second. */
export async function stockFit(steps: number, batch: number): Promise<number> {
  const tf = await import('@tensorflow/tfjs');
  await tf.setBackend('cpu'); // stock kernels: tandem's are not installed in this thread
  const { BUILTIN_MODELS } = await import('../src/model/builtin-models.js');
  const model = await BUILTIN_MODELS['alexnet-mini'].factory(tf, { inputShape: [32, 32, 3], classes: 10, seed: 1 });
  model.compile({ optimizer: tf.train.momentum(0.01, 0.9), loss: 'categoricalCrossentropy' });
  const x = tf.randomUniform([batch * steps, 32, 32, 3]);
  const y = tf.oneHot(
    tf.tensor1d(
      Array.from({ length: batch * steps }, (_, i) => i % 10),
      'int32',
    ),
    10,
  );
  const t0 = performance.now();
  await model.fit(x, y, { batchSize: batch, epochs: 1, shuffle: false, verbose: 0 });
  const seconds = (performance.now() - t0) / 1000;
  tf.dispose([x, y]);
  model.dispose();
  return (batch * steps) / seconds;
}

/** One all-reduce of `bytes` per device over the shared-memory transport, on `devices` threads: the slowest
 * thread's ms. */
export async function allReduceMs(
  kind: 'sharded' | 'primary',
  arithmetic: 'js' | 'native',
  devices: number,
  bytes: number,
  repeats: number,
): Promise<number> {
  const length = bytes / 4;
  const data = new SharedArrayBuffer(devices * bytes);
  new Float32Array(data).fill(1);
  // The run's gradient buffer as the transport sees it: registered, so the peers' slots are read in place.
  const { handles } = SHARED_MEMORY_TRANSPORT.prepare({
    name: 'bench',
    size: devices,
    registered: [{ buffer: data, slotFloats: length, slots: devices }],
    stagingFloats: 1 << 16,
    options: { allReduce: kind },
  });
  const workers = Array.from(
    { length: devices },
    (_, rank) =>
      new Worker(new URL('./allreduce-rank.js', import.meta.url), {
        workerData: { handle: handles[rank], arithmetic, data, length, repeats },
      }),
  );
  const times = await Promise.all(workers.map(async w => (await once(w, 'message'))[0] as number));
  await Promise.all(workers.map(w => w.terminate()));
  return Math.max(...times);
}

/** One `Float32Array.set` copy of `bytes`: ms, the memory bandwidth the all-reduce is held to. */
export function copyMs(bytes: number, repeats: number): number {
  const a = new Float32Array(bytes / 4).fill(1),
    b = new Float32Array(bytes / 4);
  b.set(a);
  const t0 = performance.now();
  for (let i = 0; i < repeats; i++) b.set(a);
  return (performance.now() - t0) / repeats;
}
