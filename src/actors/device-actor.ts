/**
 * Main-thread handle of one device: its compute thread and its comm thread,
 * each a worker with a typed mailbox. Unexpected exits and uncaught errors are
 * reported to `onFailure` with the device, step and phase from the control block;
 * a thread ended at its heap limit as OUT_OF_MEMORY, with the fixes (worker-memory.ts).
 */
import { once } from 'node:events';
import { Worker, type Transferable } from 'node:worker_threads';
import { workerFlags } from './worker-exec-argv.js';
import { bundledEntry } from '../bundled-entry.js';
import { isWorkerOutOfMemory, outOfMemoryWords } from './worker-memory.js';
import { TandemError, deserializeError, type SerializedError } from '../errors.js';
import type { ControlBlock } from '../pipeline/control-block.js';
import type { DeviceIdentity, FromComm, FromCompute, ToComm, ToCompute } from './protocol.js';

export interface DeviceActorEvents {
  onCompute(msg: FromCompute): void;
  onComm(msg: FromComm): void;
  onFailure(err: TandemError): void;
}

/**
 * How long `close` lets a comm thread end on its own once the run is aborted: one in the middle of an update
 * finishes it and marks it applied (an abort checkpoint can then include that step), one waiting on a peer sees
 * the abort within a wait slice (50 ms). After that it is terminated.
 */
export const COMM_EXIT_GRACE_MS = 1000;

export class DeviceActor {
  private readonly compute: Worker;
  private comm?: Worker;
  private commExited?: Promise<unknown>;
  private closing = false;
  private commDone = false;

  /** The device's global rank (its name in messages and errors). */
  readonly device: number;

  constructor(
    readonly identity: DeviceIdentity,
    private readonly control: ControlBlock,
    private readonly events: DeviceActorEvents,
  ) {
    this.device = identity.rank;
    this.compute = this.spawn('compute-worker.js', 'compute', m => events.onCompute(m as FromCompute));
  }

  private spawn(file: string, side: 'compute' | 'comm', onMessage: (m: unknown) => void): Worker {
    const w = new Worker(bundledEntry(new URL(file, import.meta.url)), {
      name: `tandem-device${this.device}-${side}`,
      ...workerFlags(),
    });
    w.on('message', onMessage);
    w.on('error', err => {
      if (isWorkerOutOfMemory(err)) this.fail(side, outOfMemoryWords(`the ${side} thread`), 'OUT_OF_MEMORY', err);
      else this.fail(side, `uncaught ${err.name}: ${err.message}`, 'DEVICE_FAILED', err);
    });
    w.on('exit', code => {
      const expected = side === 'comm' && this.commDone && code === 0;
      if (!expected) this.fail(side, `its ${side} thread exited with code ${code}`, 'WORKER_EXITED');
    });
    return w;
  }

  private fail(
    side: string,
    cause: string,
    code: 'DEVICE_FAILED' | 'WORKER_EXITED' | 'OUT_OF_MEMORY',
    err?: Error,
  ): void {
    if (this.closing) return;
    const { phase, step } = this.control.phaseOf(this.identity.local, side as 'compute' | 'comm');
    this.events.onFailure(
      new TandemError(
        code,
        `device ${this.device} failed at step ${step} in phase ${phase} (${side} thread): ${cause}`,
        { device: this.device, step, phase },
        { cause: err },
      ),
    );
  }

  postCompute(msg: ToCompute, transfer: Transferable[] = []): void {
    this.compute.postMessage(msg, transfer);
  }

  startComm(msg: ToComm, transfer: Transferable[] = []): void {
    this.comm = this.spawn('comm-worker.js', 'comm', m => {
      // Its exit is the end of its work: after 'stopped', or after an error it reported (the error is the cause, not
      // the exit).
      if ((m as FromComm).type === 'stopped' || (m as FromComm).type === 'error') this.commDone = true;
      this.events.onComm(m as FromComm);
    });
    this.commExited = once(this.comm, 'exit');
    this.comm.postMessage(msg, transfer);
  }

  /**
   * Ends both threads (call it once the control block is aborted or stopped): the compute thread at once, the comm
   * thread when it has ended on its own or after `commGraceMs`, whichever comes first. Idempotent.
   */
  async close(commGraceMs = COMM_EXIT_GRACE_MS): Promise<void> {
    this.closing = true;
    await Promise.all([this.compute.terminate(), this.endComm(commGraceMs)]);
  }

  private async endComm(graceMs: number): Promise<void> {
    if (!this.comm) return;
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<void>(resolve => {
      timer = setTimeout(resolve, graceMs);
    });
    await Promise.race([this.commExited!.catch(() => undefined), grace]);
    clearTimeout(timer);
    await this.comm.terminate();
  }
}

/**
 * An error reported as data by a device thread, rethrown on the main thread with its context: the code it
 * was raised with (DEVICE_FAILED for an error without one), the original error as its cause.
 */
export function deviceError(
  side: 'compute' | 'comm',
  device: number,
  step: number,
  phase: string,
  error: SerializedError,
): TandemError {
  const err = new TandemError(
    error.code ?? 'DEVICE_FAILED',
    `device ${device} failed at step ${step} in phase ${phase} (${side} thread): ${error.name}: ${error.message}`,
    { device, step, phase },
    { cause: deserializeError(error) },
  );
  if (error.stack) err.stack = `${err.name}: ${err.message}\n    --- on device ${device} ---\n${error.stack}`;
  return err;
}
