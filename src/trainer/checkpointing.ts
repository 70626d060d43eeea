/**
 * A run's checkpoints: the store it writes to, the checkpoint it resumes from, one written every checkpointEvery
 * steps and at a stop, and, after an abort, the last step every device completed.
 */
import type { ResolvedConfig } from '../config-types.js';
import { TandemError } from '../errors.js';
import type { WeightShape } from '../actors/protocol.js';
import type { Checkpoint, HeadState } from '../checkpoint/checkpoint-file.js';
import {
  checkpointDirOf,
  checkResume,
  earlierRunWarning,
  readResumeBytes,
  skippedCheckpointsWarning,
  takeCheckpoint,
} from './run-checkpoints.js';
import { CheckpointStore } from '../checkpoint/checkpoint-store.js';
import type { TrainingMethod } from '../methods/training-method.js';
import type { HostChannel } from '../world/host-channel.js';
import { writeAbortCheckpoint } from './abort-checkpoint.js';
import type { RunLedger } from './run-ledger.js';
import type { TrainHooks } from './run-types.js';
import type { RunThreads } from './run-threads.js';
import type { Built, LaidOut } from './run-setup.js';
import type { AbortCause } from './run-controller.js';

export class RunCheckpointing {
  store?: CheckpointStore;
  /** Where the resumed checkpoint was read (for messages). */
  resumeSource?: string;

  constructor(
    private readonly cfg: ResolvedConfig,
    private readonly threads: RunThreads,
    private readonly method: TrainingMethod,
    private readonly ledger: RunLedger,
    private readonly hooks: TrainHooks,
    /** Several hosts: this host's line to the others, once joined. */
    private readonly channel: () => HostChannel | undefined,
  ) {}

  /** The checkpoint directory, cleared of temporaries that interrupted writes left. */
  async open(): Promise<void> {
    const dir = checkpointDirOf(this.cfg);
    if (!dir) return;
    this.store = new CheckpointStore(dir, this.cfg.keepCheckpoints);
    const earlier = await earlierRunWarning(this.cfg, dir);
    if (earlier) this.hooks.onEvent?.({ type: 'warning', step: 0, message: earlier });
    const stale = await this.store.removeStaleTemporaries();
    if (stale.length > 0) {
      this.hooks.onEvent?.({
        type: 'warning',
        step: 0,
        message:
          `removed ${stale.length} temporary file(s) that interrupted checkpoint writes left in ${dir}: ` +
          stale.join(', '),
      });
    }
  }

  /**
   * The checkpoint to resume from, checked against this run; several hosts: host 0 reads it and sends it to the others.
   */
  async loadResume({ weights, state }: Built): Promise<Checkpoint> {
    const channel = this.channel();
    const bytes = channel
      ? await channel.shareCheckpoint(() => readResumeBytes(this.cfg))
      : await readResumeBytes(this.cfg);
    this.resumeSource = bytes.source;
    const ckpt = checkResume(this.cfg, bytes, weights, state);
    // host 0's (it read the directory); the others get bytes only
    const skipped = skippedCheckpointsWarning(this.cfg, ckpt, bytes);
    if (skipped) this.hooks.onEvent?.({ type: 'warning', step: 0, message: skipped });
    return ckpt;
  }

  /**
   * Several hosts, a method with local heads or a communication hook, a host other than 0: at each checkpoint its
   * devices' heads and hook state go to host 0, which writes the checkpoint (it holds every device's state then: the
   * file one process of the same world would write).
   */
  sendsHeads(): boolean {
    return (
      (this.method.localState || this.cfg.commHook !== undefined) &&
      this.cfg.topology.process !== 0 &&
      this.channel() !== undefined
    );
  }

  /** Whether a checkpoint is written after `step` (every checkpointEvery steps, and at a stop before the last step). */
  due(step: number, stopping: boolean): boolean {
    const { cfg } = this;
    return (
      (this.store !== undefined || this.sendsHeads()) &&
      ((cfg.checkpointEvery && step % cfg.checkpointEvery === 0) || (stopping && step < cfg.steps))
    );
  }

  /** `taken`: called once the checkpoint's values are in hand (before the file is written). */
  async write(laidOut: LaidOut, step: number, taken?: () => void): Promise<void> {
    await this.threads.applied(laidOut.groups.length, step);
    let heads: HeadState[] | undefined;
    let modelState: { weights: WeightShape[]; values: Float32Array } | undefined;
    if (this.method.localState || laidOut.stateTotal > 0) {
      const snaps = await this.snapshots(step);
      if (this.method.localState) heads = snaps.map(m => m.head!);
      modelState = { weights: laidOut.state, values: snaps[0].state! };
    }
    let hooks = await this.threads.hookSlots?.values();
    const channel = this.channel();
    if (!this.store) {
      // a host other than 0 (sendsHeads): host 0 writes
      taken?.();
      await channel!.sendHeads(step, { heads, hooks });
      return;
    }
    if ((heads || hooks) && channel) ({ heads, hooks } = await channel.collectHeads(step, { heads, hooks }));
    const { commHook } = this.cfg;
    const checkpoint = takeCheckpoint(
      this.cfg,
      step,
      laidOut.weights,
      laidOut.buffers,
      heads,
      modelState,
      commHook && hooks && { name: commHook.name, options: commHook.options, ranks: hooks },
    );
    taken?.();
    const written = await this.store.write(checkpoint);
    this.ledger.checkpointWritten(written);
    this.hooks.onEvent?.({ type: 'checkpoint', step, path: written });
  }

  /** Every device's local state (its head) and non-trainable weights, as of the step it finished last. */
  async snapshots(step: number) {
    const snaps = this.threads.replies.expect('headSnapshot', step);
    for (const a of this.threads.actors) a.postCompute({ type: 'snapshotHead', step });
    return snaps;
  }

  /** The error of an aborted run, once every thread ended and the last completed step is checkpointed. */
  async abortedError(cause: AbortCause, stepInFlight: number, firstStep: number, laidOut?: LaidOut) {
    const why =
      cause === 'grace'
        ? `step ${stepInFlight} did not reach its stop checkpoint within stopGraceMs (${this.cfg.stopGraceMs} ms) ` +
          'of the stop request'
        : `on request during step ${stepInFlight}`;
    const saved = await this.lastCompleted(firstStep, laidOut).catch(
      (err: unknown) => `writing its checkpoint failed: ${(err as Error).message}`,
    );
    return new TandemError('ABORTED', `run aborted: ${why}; ${saved}`);
  }

  /**
   * After an abort, every thread ended: the last completed step checkpointed (abort-checkpoint.ts); says what was done.
   */
  private async lastCompleted(firstStep: number, laidOut?: LaidOut): Promise<string> {
    const { store } = this;
    const latest = this.ledger.lastCheckpoint ? `; the latest checkpoint is ${this.ledger.lastCheckpoint}` : '';
    if (!store)
      return checkpointDirOf(this.cfg)
        ? 'no checkpoint: training had not started'
        : 'no checkpoint (no checkpointDir or out)';
    const outcome = await writeAbortCheckpoint({
      cfg: this.cfg,
      store,
      control: this.threads.control,
      laidOut,
      firstStep,
      lastCheckpoint: this.ledger.lastCheckpoint,
      stateOnThreads: this.stateOnThreads(laidOut),
    });
    switch (outcome.kind) {
      case 'written':
        this.ledger.checkpointWritten(outcome.path);
        this.hooks.onEvent?.({ type: 'checkpoint', step: outcome.step, path: outcome.path });
        return `checkpoint of step ${outcome.step}, the last step every device completed: ${outcome.path}`;
      case 'already':
        return `the last completed step is ${outcome.step}, checkpointed: ${outcome.path}`;
      case 'none':
        return `no checkpoint: ${outcome.reason}${latest}`;
      default: {
        const never: never = outcome;
        throw new Error(`unknown outcome ${JSON.stringify(never)}`);
      }
    }
  }

  /** What of the run's state lives only on the device threads (an abort checkpoint cannot hold it), if anything. */
  private stateOnThreads(laidOut?: LaidOut): string | undefined {
    if (this.method.localState) return 'local heads';
    if (laidOut && laidOut.stateTotal > 0) return 'non-trainable weights';
    return this.cfg.commHook ? `communication hook state (${this.cfg.commHook.name})` : undefined;
  }
}
