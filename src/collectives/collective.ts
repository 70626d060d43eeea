/**
 * The collective interface. A collective runs on one rank (a device's comm
 * thread) and works on that rank's buffers, as float ranges; asynchronous so
 * that a network transport (Gloo/MPI between hosts) can implement it too. The
 * shared-memory implementations also see the peers' slots of the same buffer.
 */
export const ALL_REDUCE_KINDS = ['sharded', 'primary'] as const;
export type AllReduceKind = (typeof ALL_REDUCE_KINDS)[number];

/** One buffer as every rank holds it: slot r is rank r's copy. */
export type SlotSet = readonly Float32Array[];

export interface Collective {
  readonly kind: AllReduceKind;
  readonly rank: number;
  readonly size: number;
  /** On return, every rank's slot holds the element-wise mean of all slots over [start, end). */
  allReduceMean(slots: SlotSet, start: number, end: number): Promise<void>;
  /** On return, every rank's slot holds root's values over [start, end). */
  broadcast(slots: SlotSet, root: number, start: number, end: number): Promise<void>;
}
