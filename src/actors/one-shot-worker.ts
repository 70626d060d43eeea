/**
 * A worker thread that does one job and answers once (the profiler, the
 * held-out evaluation): its reply, or a TandemError if it fails or exits
 * first; the thread is always ended.
 */
import { Worker } from 'node:worker_threads';
import { TandemError, deserializeError, type SerializedError } from '../errors.js';
import { workerFlags } from './worker-exec-argv.js';
import { bundledEntry } from '../bundled-entry.js';
import { isWorkerOutOfMemory, outOfMemoryWords } from './worker-memory.js';

export type OneShotReply<R> = R | { type: 'error'; error: SerializedError };

export async function runOneShotWorker<R extends { type: string }>(
  file: URL,
  workerData: unknown,
  what: string,
): Promise<R> {
  const worker = new Worker(bundledEntry(file), { workerData, name: `tandem-${what}`, ...workerFlags() });
  try {
    const reply = await new Promise<OneShotReply<R>>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', err =>
        reject(
          isWorkerOutOfMemory(err)
            ? new TandemError('OUT_OF_MEMORY', outOfMemoryWords(`the thread of the ${what}`), undefined, { cause: err })
            : err,
        ),
      );
      worker.once('exit', code =>
        reject(new TandemError('WORKER_EXITED', `the ${what} thread exited with code ${code}`)),
      );
    });
    if (reply.type === 'error') {
      const { error } = reply as { error: SerializedError };
      throw new TandemError(error.code ?? 'DEVICE_FAILED', `${what} failed: ${error.message}`, error.context, {
        cause: deserializeError(error),
      });
    }
    return reply as R;
  } finally {
    await worker.terminate();
  }
}
