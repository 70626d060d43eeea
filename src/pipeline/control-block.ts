/**
 * The control words every thread of a run shares: an abort flag, a stop flag,
 * and per device its phase, step and the
 * sequence numbers of the gradient hand-off (compute -> comm) and of the
 * applied update (comm -> compute). All waits are Atomics.wait in slices, each
 * checking the abort flag, with a stall deadline: every wait has a way out.
 */
import { TandemError } from '../errors.js';
import { stalledError, WAIT_SLICE_MS } from '../collectives/shared-barrier.js';

export { WAIT_SLICE_MS };

/** `handoff`: the compute thread writes gradients to shared memory; `exchange`/`update`: the comm thread. */
export const PHASES = [
  'idle',
  'setup',
  'load',
  'forward',
  'backward',
  'handoff',
  'exchange',
  'update',
  'export',
  'done',
] as const;
export type Phase = (typeof PHASES)[number];
export type ThreadSide = 'compute' | 'comm';

// Slots of the header (the piscina habit: named constants for header words).
const ABORT = 0;
const STOP = 1;
const HEADER = 8;
// Per-device words: phase and step of each of its two threads, then per group [gradsReady, applied].
const PHASE = 0;
const STEP = 1;
const COMM_OFFSET = 2;
const HEARTBEAT = 4; // [compute, comm]: bumped by every wait slice and phase change
const DEVICE_HEADER = 6;
const PER_GROUP = 2;
const GRADS_READY = 0;
const APPLIED = 1;

/**
 * How long a device thread waits on the other thread of its process (stall deadline of its control block): twice the
 * stall timeout; several hosts: four times, since that thread may itself wait on another host for twice the stall
 * timeout (a Gloo call, the hosts' stop agreement), whose failure names that host and should speak first.
 */
export function threadWaitMs(stallTimeoutMs: number, processes: number): number {
  return (processes > 1 ? 4 : 2) * stallTimeoutMs;
}

/**
 * How long a device may take to set up (engine, model, the first broadcast, its first step's first pass) before it is
 * called hung: a device still doing it on a busy machine is slow, not hung. The stall timeout when that is longer.
 */
export function setupWatchdogMs(stallTimeoutMs: number): number {
  return Math.max(stallTimeoutMs, SETUP_WATCHDOG_MS);
}
const SETUP_WATCHDOG_MS = 60_000;

/** A device thread's waits on the other thread of its process in the run's first step: threadWaitMs of setup's. */
export function firstStepWaitMs(stallTimeoutMs: number, processes: number): number {
  return threadWaitMs(setupWatchdogMs(stallTimeoutMs), processes);
}

export class ControlBlock {
  readonly words: Int32Array;
  readonly devices: number;
  readonly groups: number;
  readonly stallTimeoutMs: number;
  private readonly stride: number;
  /** The thread using this block, whose heartbeat its waits bump. */
  owner?: { device: number; side: ThreadSide };
  /** Waits for a step up to `through` (the run's first: the other thread may still be setting up) last `ms`. */
  private setup?: { through: number; ms: number };

  static byteLength(devices: number, groups: number): number {
    return (HEADER + devices * (DEVICE_HEADER + PER_GROUP * groups)) * 4;
  }

  constructor(buffer: SharedArrayBuffer, devices: number, groups: number, stallTimeoutMs: number) {
    this.words = new Int32Array(buffer);
    this.devices = devices;
    this.groups = groups;
    this.stallTimeoutMs = stallTimeoutMs;
    this.stride = DEVICE_HEADER + PER_GROUP * groups;
  }

  private base(device: number): number {
    return HEADER + device * this.stride;
  }

  get aborted(): boolean {
    return Atomics.load(this.words, ABORT) !== 0;
  }
  get stopped(): boolean {
    return Atomics.load(this.words, STOP) !== 0;
  }

  /** Wakes every waiter: they see the flag and leave. */
  abort(): void {
    Atomics.store(this.words, ABORT, 1);
    this.wakeAll();
  }
  stop(): void {
    Atomics.store(this.words, STOP, 1);
    this.wakeAll();
  }

  private wakeAll(): void {
    for (let i = 0; i < this.words.length; i++) Atomics.notify(this.words, i);
  }

  setPhase(device: number, phase: Phase, step: number, side: ThreadSide = 'compute'): void {
    const at = this.base(device) + (side === 'comm' ? COMM_OFFSET : 0);
    Atomics.store(this.words, at + PHASE, PHASES.indexOf(phase));
    Atomics.store(this.words, at + STEP, step);
    this.beat(device, side);
  }

  /** Proof of life of a thread. */
  beat(device: number, side: ThreadSide): void {
    Atomics.add(this.words, this.base(device) + HEARTBEAT + (side === 'comm' ? 1 : 0), 1);
  }

  heartbeat(device: number, side: ThreadSide): number {
    return Atomics.load(this.words, this.base(device) + HEARTBEAT + (side === 'comm' ? 1 : 0));
  }

  private beatOwner(): void {
    if (this.owner) this.beat(this.owner.device, this.owner.side);
  }

  phaseOf(device: number, side: ThreadSide = 'compute'): { phase: Phase; step: number } {
    const at = this.base(device) + (side === 'comm' ? COMM_OFFSET : 0);
    return {
      phase: PHASES[Atomics.load(this.words, at + PHASE)] ?? 'idle',
      step: Atomics.load(this.words, at + STEP),
    };
  }

  private groupWord(device: number, group: number, which: number): number {
    return this.base(device) + DEVICE_HEADER + group * PER_GROUP + which;
  }

  markGradsReady(device: number, group: number, step: number): void {
    this.publish(this.groupWord(device, group, GRADS_READY), step);
  }
  markApplied(device: number, group: number, step: number): void {
    this.publish(this.groupWord(device, group, APPLIED), step);
  }
  gradsReady(device: number, group: number): number {
    return Atomics.load(this.words, this.groupWord(device, group, GRADS_READY));
  }
  applied(device: number, group: number): number {
    return Atomics.load(this.words, this.groupWord(device, group, APPLIED));
  }

  /** Waits until the compute side handed over `group` of `step`. False when the run is stopping. */
  waitGradsReady(device: number, group: number, step: number, what: string): boolean {
    return this.waitAtLeast(this.groupWord(device, group, GRADS_READY), step, what);
  }

  /** Waits until the comm side applied `group` of `step`. */
  waitApplied(device: number, group: number, step: number, what: string): boolean {
    return this.waitAtLeast(this.groupWord(device, group, APPLIED), step, what);
  }

  /** Non-blocking form for the main thread. */
  async waitAppliedAsync(device: number, group: number, step: number): Promise<void> {
    const index = this.groupWord(device, group, APPLIED);
    for (;;) {
      const seen = Atomics.load(this.words, index);
      if (seen >= step) return;
      if (this.aborted) throw new TandemError('ABORTED', 'run aborted');
      const { async, value } = Atomics.waitAsync(this.words, index, seen, WAIT_SLICE_MS);
      if (async) await value;
    }
  }

  private publish(index: number, value: number): void {
    Atomics.store(this.words, index, value);
    Atomics.notify(this.words, index);
  }

  /**
   * Waits for steps up to `firstStep` (the run's first) last `ms` when that is longer than the stall deadline: the
   * thread on the other side may still be loading its engine or model, or taking its first cold pass.
   */
  setupWaitsThrough(firstStep: number, ms: number): void {
    this.setup = { through: firstStep, ms: Math.max(this.stallTimeoutMs, ms) };
  }

  private waitAtLeast(index: number, target: number, what: string): boolean {
    const ms = this.setup && target <= this.setup.through ? this.setup.ms : this.stallTimeoutMs;
    const deadline = Date.now() + ms;
    for (;;) {
      const seen = Atomics.load(this.words, index);
      if (seen >= target) return true;
      this.checkAbort();
      if (this.stopped) return false;
      if (Date.now() > deadline) throw stalledError(what, ms);
      this.beatOwner();
      Atomics.wait(this.words, index, seen, WAIT_SLICE_MS);
    }
  }

  checkAbort(): void {
    if (this.aborted) throw new TandemError('ABORTED', 'run aborted by another thread');
  }
}
