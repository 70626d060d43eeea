/**
 * One process of the shm-vs-loopback bench (argv[2]: a ShmBenchJob as JSON): prepares its end of the shm transport
 * (one communicator per staging piece size in `pieces`; 0: the transport's default) and of the gloo transport (TCP
 * over 127.0.0.1) as a host of a world does, then per buffer size all-reduces (sum) `repeats` times on each,
 * alternating them so the machine's noise falls on all alike, each timing started after a barrier of its transport.
 * Rank 0 prints one JSON line of the milliseconds.
 */
import type { Collective, CollectiveEnv } from '../src/collectives/collective.js';
import type { CommunicatorSpec } from '../src/collectives/transport.js';
import { PROCESS_SHM_TRANSPORT, prepareShm } from '../src/collectives/process-shm-transport.js';
import { GLOO_TRANSPORT } from '../src/collectives/gloo-transport.js';

export interface ShmBenchJob {
  rank: number;
  size: number;
  store: string;
  sizes: number[];
  repeats: number[];
  pieces: number[];
}
/** shm[i]: the times with staging pieces of `pieces[i]` floats. */
export interface ShmBenchTimes {
  bytes: number;
  shm: number[][];
  gloo: number[];
}

const job = JSON.parse(process.argv[2]) as ShmBenchJob;
const env: CollectiveEnv = { timeoutMs: 120_000, isAborted: () => false };
const spec = (key: string): CommunicatorSpec => ({
  name: 'bench',
  size: 1,
  registered: [],
  stagingFloats: 1 << 16,
  options: { allReduce: 'sharded' },
  world: {
    store: job.store,
    rankOffset: job.rank,
    worldSize: job.size,
    hostname: '127.0.0.1',
    ranksPerProcess: 1,
    key,
  },
});

const shms: Collective[] = [];
for (const piece of job.pieces)
  shms.push(
    PROCESS_SHM_TRANSPORT.open(
      (await prepareShm(spec(`bench.shm.${piece}`), { chunkFloats: piece || undefined })).handles[0],
      env,
    ),
  );
const gloo = GLOO_TRANSPORT.open((await GLOO_TRANSPORT.prepare(spec('bench.gloo'))).handles[0], env);

function timed(c: Collective, buf: Float32Array): number {
  c.blocking!.barrier();
  const t0 = performance.now();
  c.blocking!.allReduce(buf, 0, buf.length, 'sum');
  return performance.now() - t0;
}

const results: ShmBenchTimes[] = [];
job.sizes.forEach((bytes, i) => {
  const buf = new Float32Array(bytes / 4).fill(1 / (job.rank + 1));
  for (let w = 0; w < 3; w++) {
    for (const shm of shms) timed(shm, buf);
    timed(gloo, buf);
  }
  const row: ShmBenchTimes = { bytes, shm: shms.map(() => []), gloo: [] };
  for (let r = 0; r < job.repeats[i]; r++) {
    shms.forEach((shm, k) => row.shm[k].push(timed(shm, buf)));
    row.gloo.push(timed(gloo, buf));
  }
  results.push(row);
});
gloo.blocking!.barrier();
gloo.close();
for (const shm of shms) shm.close();
if (job.rank === 0) process.stdout.write(`${JSON.stringify(results)}\n`);
process.exit(0);
