/**
 * Step probes: plugin code run at fixed points of every device's step, in the thread that reaches the point — a
 * device's compute thread as it enters a phase, its comm thread as it exchanges and updates, a loader thread as it
 * reads a shard. A probe may fail its thread (throw, exit, stop answering), replace a forward output, or change a
 * replica's parameters after an update: what tandem's reliability tests need to make a device fail the way a real
 * one can (their probe is a test plugin, test/fixtures/fault-plugin.ts), and what a user's instrumentation can read.
 *
 * A probe reads its settings from the run's plugin options (the keys its plugin declared with `registerOptions`),
 * which every thread receives. Registered per thread (plugins load in every thread); duplicates refused.
 */
import { NamedRegistry, threadShared } from '../named-registry.js';
import { TandemError } from '../errors.js';
import type { Tensor } from '../engine/tfjs-types.js';

/** The thread a probe point is in. */
export type ProbeThread = 'compute' | 'comm' | 'loader';

/** Where a probe is called: the thread, the phase it enters, the device (global rank) and the step. */
export interface ProbePoint {
  readonly thread: ProbeThread;
  readonly phase: string;
  readonly device: number;
  readonly step: number;
}

/** The values of the options plugins declared (top-level keys of the train config), as every thread receives them. */
export type PluginValues = Readonly<Record<string, unknown>>;

export interface StepProbe {
  readonly name: string;
  /** A thread enters a phase (compute: setup, load, forward, backward, export, done; comm: exchange, update). */
  enter?(at: ProbePoint, values: PluginValues): void;
  /** The model's output of a training step's forward pass (compute thread); returns it, or what replaces it. */
  forwardOutput?(at: ProbePoint, values: PluginValues, output: Tensor): Tensor;
  /** After the update of parameter group `group` (comm thread): the replica's parameters, its group's first float. */
  updated?(at: ProbePoint & { group: number }, values: PluginValues, params: Float32Array, groupStart: number): void;
}

const registry = new NamedRegistry<StepProbe>(
  'step probe',
  [],
  name => new TandemError('BAD_CONFIG', `no step probe named '${name}' is registered`),
);
/** This thread's probes, in registration order (shared with other copies of tandem in the thread, as the registry). */
const active = threadShared('step-probes', () => ({ probes: [] as StepProbe[] }));

/** Adds a probe to this thread's points (a plugin module calls it when it loads). */
export function registerStepProbe(probe: StepProbe): void {
  registry.register(probe);
  active.probes = registry.names().map(n => registry.get(n));
}

/** The names of this thread's probes. */
export function stepProbeNames(): string[] {
  return registry.names();
}

/** Calls every probe's `enter`. */
export function probeEnter(at: ProbePoint, values: PluginValues): void {
  for (const p of active.probes) p.enter?.(at, values);
}

/** The forward output after every probe's `forwardOutput`. */
export function probeForward(at: ProbePoint, values: PluginValues, output: Tensor): Tensor {
  return active.probes.reduce((out, p) => p.forwardOutput?.(at, values, out) ?? out, output);
}

/** Whether some probe looks at updated parameters (the comm thread adds the stage only then). */
export function probesUpdates(): boolean {
  return active.probes.some(p => p.updated !== undefined);
}

/** Calls every probe's `updated`. */
export function probeUpdated(
  at: ProbePoint & { group: number },
  values: PluginValues,
  params: Float32Array,
  groupStart: number,
): void {
  for (const p of active.probes) p.updated?.(at, values, params, groupStart);
}
