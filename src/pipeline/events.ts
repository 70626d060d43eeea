/** The events that flow through the gradient pipeline. */
import type { ExchangeChunk } from './priority-schedule.js';

/** One variable's gradient is final and already in this device's gradient slot. */
export interface GradientReady {
  step: number;
  /** Float range of the variable in the layout. */
  start: number;
  end: number;
  layer: string;
  /** wallNow() when it became ready. */
  at: number;
}

/** Every gradient of exchange group `group` is in the slot: the group can be exchanged. */
export interface GroupReady {
  step: number;
  group: number;
  at: number;
}

/** A group as it moves through the comm side. */
export interface GroupExchange {
  step: number;
  group: number;
  waitStart: number;
  waitEnd: number;
  /** Priority exchange: the chunk of the group this unit carries (absent: the whole group). */
  chunk?: ExchangeChunk;
  /**
   * Sharded local update (reduceScatterGroup): the float range of the group this device reduced and updates for every
   * replica.
   */
  shard?: [number, number];
  exchangeStart?: number;
  exchangeEnd?: number;
  applyStart?: number;
  applyEnd?: number;
  /** The averaged gradient of the group was not finite: its update was skipped (`onNan: 'skip-step'`). */
  skipped?: boolean;
}
