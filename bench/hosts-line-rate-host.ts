/**
 * One host of the line-rate bench (`npm run bench -- hosts-line-rate`): a process in a host's network namespace
 * that times one way of moving an all-reduce's bytes across the shaped veth to the other host(s).
 *
 * - `tcp`: plain TCP, every rank sends S bytes to its peer and receives S bytes at once (both directions busy:
 *   what an ideal 2-rank all-reduce moves), on one connection; `tcp-oneway`: rank 0 sends S bytes, rank 1 answers
 *   one byte (the link's rate in one direction).
 * - `gloo-<algorithm>`: tandem's gloo collective's all-reduce (sum) of S/4 floats with that algorithm (checked);
 *   `gloo-ring`: Gloo's own ring all-reduce (what PyTorch DDP's gloo backend runs; not rank-ordered).
 *
 *   node dist/bench/hosts-line-rate-host.js
 *   '{"method":"tcp","rank":0,"size":2,"addresses":["10.213.9.1","10.213.9.2"],
 *     "port":29600,"bytes":2345000,"repeats":6}'      (one argument)
 *
 * Prints one JSON line: { rank, method, ms: [each timed repeat's ms], setupMs } after one untimed repeat (setupMs,
 * gloo only: connecting through the rendezvous store, with the job secret's handshakes when TANDEM_JOB_SECRET is set,
 * to the first barrier's end). Host 0's main thread
 * serves the store (gloo) or listens (tcp); the gloo ranks run on a worker thread (a Gloo call blocks its thread).
 */
import { createServer, connect, type Socket } from 'node:net';
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import { openGlooCollective, type GlooAllReduceAlgorithm } from '../src/collectives/gloo-transport.js';
import { timeOnWorker } from './gloo-timing-worker.js';
import { loadGlooAddon } from '../src/collectives/gloo/gloo-addon.js';
import { JS_ARITHMETIC, nativeArithmetic } from '../src/optim/flat-arithmetic.js';
import { loadNativeAddon } from '../src/engine/native/native-addon.js';

export type LineRateMethod = 'tcp' | 'tcp-oneway' | 'gloo-ring' | `gloo-${GlooAllReduceAlgorithm}`;

export interface LineRateArgs {
  method: LineRateMethod;
  rank: number;
  size: number;
  /** Every host's address; host 0 serves the store / listens at addresses[0]:port. */
  addresses: string[];
  port: number;
  bytes: number;
  repeats: number;
  /** Floats per chunk of the pipelined algorithm (default: the transport's). */
  chunkFloats?: number;
}

export interface LineRateResult {
  rank: number;
  method: LineRateMethod;
  ms: number[];
  /** Gloo: ms from the start of the rank's thread to the end of its first barrier (store handshakes included). */
  setupMs?: number;
}

/** Reads exactly `bytes` bytes from the socket's stream (the 'data' events), then resolves. */
function receiver(socket: Socket): (bytes: number) => Promise<void> {
  let have = 0;
  let waiting: { bytes: number; resolve: () => void } | undefined;
  socket.on('data', (d: Buffer) => {
    have += d.length;
    if (waiting && have >= waiting.bytes) {
      have -= waiting.bytes;
      const w = waiting;
      waiting = undefined;
      w.resolve();
    }
  });
  return bytes =>
    new Promise(resolve => {
      if (have >= bytes) {
        have -= bytes;
        resolve();
        return;
      }
      waiting = { bytes, resolve };
    });
}

async function tcpSocket(args: LineRateArgs): Promise<Socket> {
  if (args.rank === 0) {
    return new Promise((resolve, reject) => {
      const server = createServer(s => {
        server.close();
        resolve(s);
      });
      server.once('error', reject);
      server.listen(args.port, args.addresses[0]);
    });
  }
  for (;;) {
    try {
      return await new Promise<Socket>((resolve, reject) => {
        const s = connect(args.port, args.addresses[0], () => resolve(s));
        s.once('error', reject);
      });
    } catch {
      await new Promise(r => setTimeout(r, 50));
    }
  }
}

async function timeTcp(args: LineRateArgs): Promise<number[]> {
  if (args.size !== 2) throw new Error('hosts-line-rate: plain TCP runs between 2 hosts');
  const socket = await tcpSocket(args);
  socket.setNoDelay(true);
  const receive = receiver(socket);
  const payload = Buffer.alloc(args.bytes, 7);
  const oneway = args.method === 'tcp-oneway';
  const ms: number[] = [];
  for (let i = 0; i <= args.repeats; i++) {
    // a one-byte handshake lines both ends up before each repeat
    socket.write(Buffer.alloc(1));
    await receive(1);
    const t0 = performance.now();
    if (oneway) {
      if (args.rank === 0) {
        socket.write(payload);
        await receive(1);
      } else {
        await receive(args.bytes);
        socket.write(Buffer.alloc(1));
      }
    } else {
      const sent = new Promise<void>(resolve => socket.write(payload, () => resolve()));
      await Promise.all([receive(args.bytes), sent]);
    }
    if (i > 0) ms.push(performance.now() - t0);
  }
  socket.end();
  return ms;
}

/** The set-up's ms, then the timed all-reduces', on this (worker) thread. */
function timeGloo(args: LineRateArgs): number[] {
  const start = performance.now();
  const reducer = loadNativeAddon().loaded ? nativeArithmetic() : JS_ARITHMETIC;
  const floats = Math.round(args.bytes / 4);
  const buf = new Float32Array(floats).fill(args.rank + 1);
  const ms: number[] = [];
  if (args.method === 'gloo-ring') {
    const load = loadGlooAddon();
    if (!load.loaded) throw new Error(load.reason);
    const ctx = new load.addon.GlooContext({
      rank: args.rank,
      size: args.size,
      store: `tcp://${args.addresses[0]}:${args.port}`,
      prefix: 'line-rate',
      hostname: args.addresses[args.rank],
      timeoutMs: 300_000,
    });
    ctx.connect();
    ctx.barrier();
    ms.push(performance.now() - start);
    for (let i = 0; i <= args.repeats; i++) {
      const t0 = performance.now();
      ctx.allReduce(buf, 'sum');
      if (i > 0) ms.push(performance.now() - t0);
    }
    ctx.barrier();
    ctx.close();
    return ms;
  }
  const algorithm = args.method.slice('gloo-'.length) as GlooAllReduceAlgorithm;
  const c = openGlooCollective(
    args.rank,
    args.size,
    {
      store: `tcp://${args.addresses[0]}:${args.port}`,
      prefix: 'line-rate',
      hostname: args.addresses[args.rank],
      algorithm,
      ...(args.chunkFloats ? { pipelineChunkFloats: args.chunkFloats } : {}),
    },
    { timeoutMs: 300_000, isAborted: () => false, reducer },
  );
  try {
    c.blocking.barrier();
    ms.push(performance.now() - start);
    for (let i = 0; i <= args.repeats; i++) {
      buf.fill(args.rank + 1);
      const t0 = performance.now();
      c.blocking.allReduce(buf, 0, buf.length, 'sum');
      if (i > 0) ms.push(performance.now() - t0);
    }
    c.blocking.barrier();
  } finally {
    c.close();
  }
  const want = (args.size * (args.size + 1)) / 2;
  const wrong = buf.findIndex(v => v !== want);
  if (wrong >= 0)
    throw new Error(`hosts-line-rate: element ${wrong} is ${buf[wrong]} after the all-reduces, not ${want}`);
  return ms;
}

async function main(args: LineRateArgs): Promise<LineRateResult> {
  if (args.method === 'tcp' || args.method === 'tcp-oneway')
    return { rank: args.rank, method: args.method, ms: await timeTcp(args) };
  const store = args.rank === 0 ? { host: args.addresses[0], port: args.port, clients: args.size } : undefined;
  const [setupMs, ...ms] = await timeOnWorker(new URL(import.meta.url), args, store);
  return { rank: args.rank, method: args.method, ms, setupMs };
}

if (isMainThread) console.log(JSON.stringify(await main(JSON.parse(process.argv[2] ?? '{}') as LineRateArgs)));
else parentPort!.postMessage(timeGloo(workerData as LineRateArgs));
