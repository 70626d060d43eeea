/**
 * One host of the hosts bench's communication probe (`npm run bench -- hosts`):
 * a process started in a host's network namespace that times all-reduces of
 * the model's full gradient (its float count) over tandem's gloo transport
 * (openGlooCollective, the transport a run across hosts uses, with the
 * engine's reducer), across the shaped veth to the other host. Host 0's main
 * thread serves the store the two ranks meet at; the ranks run on a worker
 * thread (a Gloo call blocks its thread).
 *
 *   node dist/bench/hosts-link-probe.js
 *   '{"rank":0,"store":"10.213.9.1:29600","hostname":"10.213.9.1","floats":586250,"repeats":6}'
 *
 * Prints one JSON line: { rank, floats, ms: [each timed all-reduce's ms] }
 * after one untimed all-reduce.
 */
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import { openGlooCollective } from '../src/collectives/gloo-transport.js';
import { timeOnWorker } from './gloo-timing-worker.js';
import { JS_ARITHMETIC, nativeArithmetic } from '../src/optim/flat-arithmetic.js';
import { loadNativeAddon } from '../src/engine/native/native-addon.js';

export interface ProbeArgs {
  rank: 0 | 1;
  /** host 0's address and port, `HOST:PORT` (host 0 serves the store there). */
  store: string;
  /** This host's address on the link. */
  hostname: string;
  floats: number;
  repeats: number;
}

export interface ProbeResult {
  rank: number;
  floats: number;
  ms: number[];
}

/**
 * The timed all-reduces (on a worker thread: a Gloo call blocks its thread, and host 0's main thread serves the store).
 */
function timeAllReduces(args: ProbeArgs): number[] {
  const reducer = loadNativeAddon().loaded ? nativeArithmetic() : JS_ARITHMETIC;
  const c = openGlooCollective(
    args.rank,
    2,
    { store: `tcp://${args.store}`, prefix: 'hosts-bench', hostname: args.hostname },
    { timeoutMs: 300_000, isAborted: () => false, reducer },
  );
  const buf = new Float32Array(args.floats).fill(args.rank + 1);
  const ms: number[] = [];
  try {
    c.blocking.barrier();
    for (let i = 0; i <= args.repeats; i++) {
      const t0 = performance.now();
      c.blocking.allReduce(buf, 0, buf.length, 'mean');
      if (i > 0) ms.push(performance.now() - t0);
    }
    c.blocking.barrier();
  } finally {
    c.close();
  }
  // rank r's buffer is all r + 1: the mean is 1.5 everywhere, and stays so
  const wrong = buf.findIndex(v => v !== 1.5);
  if (wrong >= 0) throw new Error(`hosts-link-probe: element ${wrong} is ${buf[wrong]} after the all-reduces, not 1.5`);
  return ms;
}

async function main(args: ProbeArgs): Promise<ProbeResult> {
  const [host, port] = args.store.split(':');
  const store = args.rank === 0 ? { host, port: Number(port), clients: 2 } : undefined;
  return { rank: args.rank, floats: args.floats, ms: await timeOnWorker(new URL(import.meta.url), args, store) };
}

if (isMainThread) console.log(JSON.stringify(await main(JSON.parse(process.argv[2] ?? '{}') as ProbeArgs)));
else parentPort!.postMessage(timeAllReduces(workerData as ProbeArgs));
