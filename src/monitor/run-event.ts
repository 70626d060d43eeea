/**
 * Lifecycle events and warnings of a run (`events$`), in the order they happen. Several hosts: every event carries
 * `host`, the host it happened on; host 0's stream has its own events and the other hosts' warnings (a host's
 * failure arrives there as a warning).
 */
import type { TandemErrorCode } from '../errors.js';
import type { EngineDevice } from '../engine/engine.js';

export type RunEvent = { host?: number } &
  /** engineDevices: per device of this process, the accelerator its engine opened (webgpu: the GPU adapter). */
  (
    | {
        type: 'started';
        devices: number;
        backend: string;
        method: string;
        strategy: string;
        steps: number;
        firstStep: number;
        stepsPerEpoch: number;
        /** The learning-rate schedule's kind, when the lr changes over the run (the step lines then show it). */
        lrSchedule?: string;
        /** What convolutions and matmuls multiply in: `fp32`, or `bf16 (oneDNN <implementation> on <CPU flags>)`. */
        precision: string;
        engineDevices?: EngineDevice[];
      }
    | { type: 'auto'; strategy: string; splitLayer?: number; reason: string }
    | { type: 'ready'; parameters: number; groups: number }
    /** `dashboard`: the live page's address (with its token, when bound off loopback: said this once). */
    | { type: 'dashboard'; url: string }
    | { type: 'epoch'; epoch: number; step: number }
    /** With epoch logs (validationSplit, earlyStopping): the epoch's logs as tfjs's model.fit names them. */
    | { type: 'epochEnd'; epoch: number; step: number; logs: Record<string, number> }
    | { type: 'checkpoint'; step: number; path: string }
    | { type: 'warning'; step: number; message: string }
    | { type: 'stopped'; step: number }
    | { type: 'finished'; steps: number; modelPath?: string; tracePath?: string; timelinePath?: string }
    /**
     * The run failed (or was aborted): the last event; `done` rejects with the same error. The streams complete, they
     * never error.
     */
    | { type: 'failed'; code?: TandemErrorCode; message: string; device?: number; step?: number; phase?: string }
  );
