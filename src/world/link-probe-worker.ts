/**
 * The thread of the link probe (link-probe.ts): joins a Gloo context of one
 * rank per host at the rendezvous store and times all-reduces of growing
 * sizes (a tiny one for the latency first). Every host takes the same sizes:
 * after each size the hosts agree on its time (an all-reduce of the local
 * median) and stop together once an all-reduce takes longer than `stopMs`.
 * Each size's process CPU (process.cpuUsage: every thread, Gloo's included)
 * over its timed repeats is agreed the same way (the hosts' mean).
 * A Gloo call blocks its thread, and host 0's main thread serves the store:
 * hence a thread.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { openGlooCollective } from '../collectives/gloo-transport.js';
import { serializeError } from '../errors.js';
import type { LinkSample } from '../profiling/link-fit.js';

export interface LinkProbeRequest {
  rank: number;
  size: number;
  store: string;
  prefix: string;
  hostname: string;
  timeoutMs: number;
  /** Floats per all-reduce, ascending. */
  floats: number[];
  repeats: number;
  stopMs: number;
}
export type LinkProbeReply =
  { type: 'samples'; samples: LinkSample[] } | { type: 'error'; error: ReturnType<typeof serializeError> };

function probe(req: LinkProbeRequest): LinkSample[] {
  const c = openGlooCollective(
    req.rank,
    req.size,
    { store: req.store, prefix: req.prefix, hostname: req.hostname },
    { timeoutMs: req.timeoutMs, isAborted: () => false },
  );
  const agreed = new Float32Array(2);
  const samples: LinkSample[] = [];
  try {
    c.blocking.barrier();
    for (const floats of req.floats) {
      const buf = new Float32Array(floats).fill(1);
      c.blocking.allReduce(buf, 0, floats, 'mean'); // untimed: connections, pages, caches
      const ms: number[] = [];
      const cpu0 = process.cpuUsage();
      for (let i = 0; i < req.repeats; i++) {
        const t0 = performance.now();
        c.blocking.allReduce(buf, 0, floats, 'mean');
        ms.push(performance.now() - t0);
      }
      const cpu = process.cpuUsage(cpu0);
      ms.sort((a, b) => a - b);
      agreed[0] = ms[ms.length >> 1];
      agreed[1] = (cpu.user + cpu.system) / 1000 / req.repeats;
      c.blocking.allReduce(agreed, 0, 2, 'mean'); // every host gets the same bits: they stop at the same size
      samples.push({ bytes: floats * 4, ms: agreed[0], cpuMs: agreed[1] });
      if (agreed[0] > req.stopMs) break;
    }
    c.blocking.barrier();
  } finally {
    c.close();
  }
  return samples;
}

const port = parentPort!;
try {
  port.postMessage({ type: 'samples', samples: probe(workerData as LinkProbeRequest) } satisfies LinkProbeReply);
} catch (err) {
  port.postMessage({ type: 'error', error: serializeError(err) } satisfies LinkProbeReply);
}
