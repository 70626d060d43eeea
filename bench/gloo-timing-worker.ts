/**
 * The main-thread half of the benches' Gloo timing processes (hosts-link-probe.ts, hosts-line-rate-host.ts):
 * rank 0 serves the rendezvous store, the timed collectives run on a worker thread of `module` (a blocking
 * Gloo call would freeze the store served on this thread), and the worker posts back its timings in ms.
 */
import { Worker } from 'node:worker_threads';
import { startStoreServer } from '../src/collectives/gloo/tcp-store-server.js';

export interface StoreToServe {
  host: string;
  port: number;
  clients: number;
}

/** Runs `module` as a worker with `data` (serving `store` meanwhile when given) and resolves with the ms it posts. */
export async function timeOnWorker(module: URL, data: unknown, store?: StoreToServe): Promise<number[]> {
  const server = store
    ? await startStoreServer({ host: store.host, port: store.port, closeAfterClients: store.clients })
    : undefined;
  try {
    const worker = new Worker(module, { workerData: data });
    return await new Promise<number[]>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
      worker.once('exit', code => reject(new Error(`the all-reduce thread exited with code ${code}`)));
    });
  } finally {
    await server?.close();
  }
}
