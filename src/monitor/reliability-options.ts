/**
 * The reliability section of a train config: what a non-finite gradient does, the replica check, the grace of a
 * stop, the watchdog.
 */
import type { OptionTable } from '../options/declaration.js';
import { choice, finiteIn, nonNegativeInt } from '../options/option-checks.js';

export interface ReliabilityOptions {
  /**
   * A non-finite gradient: `error` (default) fails the run naming the first offending variable, before it is
   * handed over; `skip-step` hands it over and every device skips the update of each group whose averaged
   * gradient is non-finite (identically everywhere), with a warning naming the first offending variable.
   */
  onNan?: 'error' | 'skip-step';
  /**
   * Compare a digest of every replica's parameter bits (every device of every host) every K steps; a difference ends
   * the run on every host with REPLICA_DIVERGED. Default 100; 0 turns it off.
   */
  replicaCheckEvery?: number;
  /**
   * After `stop()` (the CLI: a first SIGINT/SIGTERM/SIGHUP), how long the step in flight may take to finish and reach
   * its stop checkpoint; past it the run is aborted as by `abort()` (a second signal). Default 5000.
   */
  stopGraceMs?: number;
  /**
   * Watchdog: how long the main thread waits for a device's report before failing the run and naming it.
   * Device threads waiting on a peer give up after twice this (so the watchdog, which knows who is silent, speaks
   * first).
   */
  stallTimeoutMs?: number;
}

/** Steps between two replica checks (a digest of every replica's parameters, compared across devices and hosts). */
export const DEFAULT_REPLICA_CHECK_EVERY = 100;

export const RELIABILITY_OPTIONS: OptionTable<ReliabilityOptions> = {
  onNan: {
    kind: 'string',
    group: 'reliability',
    hosts: 'same',
    choices: ['error', 'skip-step'],
    default: 'error',
    doc: "a non-finite gradient fails the run, or every device skips that group's update",
    check: choice(['error', 'skip-step'] as const),
  },
  replicaCheckEvery: {
    kind: 'integer',
    group: 'reliability',
    hosts: 'same',
    arg: 'K',
    default: `${DEFAULT_REPLICA_CHECK_EVERY} (0: off)`,
    doc: "compare every replica's parameter bits every K steps",
    check: nonNegativeInt(),
  },
  stopGraceMs: {
    kind: 'real',
    group: 'reliability',
    hosts: "own: this host's own wait for a stopped step",
    arg: 'MS',
    default: '5000',
    doc: 'how long a stopped step may take before it is aborted',
    check: finiteIn(0, 24 * 3600_000),
  },
  stallTimeoutMs: {
    kind: 'real',
    group: 'reliability',
    hosts: "own: this host's own watchdog",
    arg: 'MS',
    default: '120000',
    doc: 'watchdog: a silent device fails the run after MS, a silent peer host after 2 × MS',
    check: finiteIn(100, 24 * 3600_000),
  },
};
