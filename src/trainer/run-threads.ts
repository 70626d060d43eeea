/**
 * The threads of one run and how they end: the control block they share, one device actor per local device, their
 * replies, the data loader, and the run's first failure. Every thread ends once (endThreads), whether the run succeeds
 * or fails; the first failure of any thread rejects the run with the device, step, phase and code it was raised with.
 */
import type { Topology } from '../world/topology.js';
import { localRanks } from '../world/topology.js';
import { TandemError } from '../errors.js';
import { ControlBlock } from '../pipeline/control-block.js';
import { deviceError, type DeviceActor } from '../actors/device-actor.js';
import type { FromComm, FromCompute } from '../actors/protocol.js';
import type { ShardLoader } from '../data/shard-loader.js';
import { MAX_GROUPS } from '../pipeline/strategy.js';
import { ComputeReplies } from './compute-replies.js';
import type { HookStateSlots } from './hook-state-slots.js';
import type { RunLedger } from './run-ledger.js';

/** How long a PEER_LOST failure waits for the lost peer's own error (in this process), which names the cause. */
const PEER_LOST_GRACE_MS = 500;

/** Names the thread that left a reply unanswered (stall-inspector.ts); undefined when the reply came meanwhile. */
export type NameSilent = (silent: number[], unanswered: () => boolean) => Promise<TandemError | undefined>;

export class RunThreads {
  readonly control: ControlBlock;
  readonly controlBuffer: SharedArrayBuffer;
  readonly actors: DeviceActor[] = [];
  readonly replies: ComputeReplies;
  loader?: ShardLoader;
  /** With a communication hook and checkpoints: the comm threads' shared hook state. */
  hookSlots?: HookStateSlots;
  failure?: TandemError;
  private peerLost?: NodeJS.Timeout;
  private rejectRun?: (err: TandemError) => void;
  private ending?: Promise<void>;

  constructor(
    topology: Topology,
    stallTimeoutMs: number,
    private readonly ledger: RunLedger,
    nameSilent: NameSilent,
  ) {
    const local = topology.localDevices;
    const groupCount = MAX_GROUPS; // control words for as many groups as any strategy may use
    this.controlBuffer = new SharedArrayBuffer(ControlBlock.byteLength(local, groupCount));
    this.control = new ControlBlock(this.controlBuffer, local, groupCount, stallTimeoutMs);
    for (let d = 0; d < local; d++) {
      for (let g = 0; g < groupCount; g++) {
        // sequence words start "before step 0"
        this.control.markGradsReady(d, g, -1);
        this.control.markApplied(d, g, -1);
      }
      this.control.setPhase(d, 'setup', 0, 'compute');
      this.control.setPhase(d, 'setup', 0, 'comm');
    }
    this.replies = new ComputeReplies(
      localRanks(topology),
      stallTimeoutMs,
      (silent, unanswered) =>
        void nameSilent(silent, unanswered).then(err => {
          if (err) this.fail(err);
        }),
    );
  }

  /** A promise that rejects with the run's first failure (never resolves). */
  failed(): Promise<never> {
    const failed = new Promise<never>((_, reject) => {
      this.rejectRun = reject;
    });
    failed.catch(() => {});
    return failed;
  }

  /**
   * Setup goes on only while the run lives: a failure or an abort while setup awaited something ends it there, before
   * it starts threads that the run's end (which has already happened) would not close.
   */
  throwIfEnded(): void {
    if (this.failure) throw this.failure;
  }

  /** Every thread of the run ends (once). */
  endThreads(): Promise<void> {
    this.ending ??= (async () => {
      this.control.abort();
      await Promise.all(this.actors.map(a => a.close()));
      await this.loader?.close();
    })();
    return this.ending;
  }

  /** Resolves when every device applied every group (of `groupCount`) of `step`. */
  applied(groupCount: number, step: number): Promise<void> {
    const waits = this.actors.flatMap(a =>
      Array.from({ length: groupCount }, (_, g) => this.control.waitAppliedAsync(a.identity.local, g, step)),
    );
    return Promise.all(waits).then(() => undefined);
  }

  /**
   * Resolves true once every device applied every group of `step`, false after `ms` or when the run ends first (a
   * thread hung in its update must not hold the caller).
   */
  appliedWithin(groupCount: number, step: number, ms: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<boolean>(resolve => {
      timer = setTimeout(() => resolve(false), ms);
    });
    const applied = this.applied(groupCount, step).then(
      () => true,
      () => false,
    );
    return Promise.race([applied, late]).finally(() => clearTimeout(timer));
  }

  fail(err: TandemError): void {
    if (this.failure) return;
    if (err.code === 'PEER_LOST') {
      // A rank that lost its peer usually hears of it before the peer's own error (the cause) arrives: wait a moment
      // for it.
      this.peerLost ??= setTimeout(() => this.failNow(err), PEER_LOST_GRACE_MS);
      return;
    }
    this.failNow(err);
  }

  private failNow(err: TandemError): void {
    if (this.failure) return;
    clearTimeout(this.peerLost);
    this.failure = err;
    this.control.abort();
    this.rejectRun?.(err);
  }

  onCompute(msg: FromCompute): void {
    if (msg.type === 'error') {
      this.fail(deviceError('compute', msg.device, msg.step, msg.phase, msg.error));
      return;
    }
    if (msg.type === 'stepDone') this.ledger.recordSpans(msg.spans);
    if (msg.type === 'stepDone') for (const report of msg.exchanged ?? []) this.ledger.exchanged(report);
    this.replies.deliver(msg);
  }

  onComm(msg: FromComm): void {
    switch (msg.type) {
      case 'error':
        if (msg.error.code === 'ABORTED' && this.failure) return;
        this.fail(deviceError('comm', msg.device, msg.step, msg.phase, msg.error));
        return;
      case 'exchanged':
        this.ledger.exchanged(msg);
        return;
      case 'hookState':
        this.hookSlots?.deliver(msg.device, msg.arrays);
        return;
      case 'stopped':
        return;
      default: {
        const never: never = msg;
        throw new Error(`unknown comm message ${JSON.stringify(never)}`);
      }
    }
  }
}
