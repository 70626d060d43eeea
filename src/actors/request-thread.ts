/**
 * A worker thread that answers its requests in order, one message each (`ready` first, when it has loaded): the
 * answers as promises; an `{ type: 'error' }` answer, the thread's error or its exit reject them, naming `what` it
 * does. fit's validation and the trainer's epoch validation keep such threads for a run.
 */
import type { Worker } from 'node:worker_threads';
import { TandemError, deserializeError, type SerializedError } from '../errors.js';

type Failed = { type: 'error'; error: SerializedError };

export class RequestThread<Answer extends { type: string }, Request> {
  private readonly waiting: { resolve(a: Answer): void; reject(e: unknown): void }[] = [];
  private ended?: unknown;
  /** The thread's first answer (its `ready`). */
  readonly ready: Promise<Answer>;

  constructor(
    private readonly worker: Worker,
    private readonly what: string,
  ) {
    this.ready = this.next();
    worker.on('message', (m: Answer | Failed) => {
      const w = this.waiting.shift();
      if (m.type !== 'error') return w?.resolve(m as Answer);
      const { error } = m as Failed;
      w?.reject(
        new TandemError(error.code ?? 'DEVICE_FAILED', `${what} failed: ${error.message}`, error.context, {
          cause: deserializeError(error),
        }),
      );
    });
    worker.on('error', err => this.end(err));
    worker.on('exit', code =>
      this.end(new TandemError('WORKER_EXITED', `the ${what} thread exited with code ${code}`)),
    );
  }

  private end(err: unknown): void {
    this.ended ??= err;
    for (const w of this.waiting.splice(0)) w.reject(err);
  }

  private next(): Promise<Answer> {
    if (this.ended !== undefined) return Promise.reject(this.ended);
    return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }));
  }

  ask(request: Request): Promise<Answer> {
    const answer = this.next();
    this.worker.postMessage(request);
    return answer;
  }

  async close(): Promise<void> {
    this.ended ??= new TandemError('WORKER_EXITED', `the ${this.what} thread was closed`);
    await this.worker.terminate();
  }
}

/** Every thread ready, else all of them closed and the first failure thrown. */
export async function allReady<T extends { ready: Promise<unknown>; close(): Promise<void> }>(
  threads: T[],
): Promise<T[]> {
  await Promise.all(threads.map(t => t.ready)).catch(async err => {
    await Promise.all(threads.map(t => t.close()));
    throw err;
  });
  return threads;
}
