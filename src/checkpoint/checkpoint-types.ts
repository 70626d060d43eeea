/** What a checkpoint holds (checkpoint-file.ts writes and reads it, checkpoint-fields.ts checks it). */
export interface HeadState {
  w: Float32Array;
  b?: Float32Array;
  state: Float32Array[][];
}

/**
 * The run's communication hook (name, options) and every rank's state of it: ranks[rank][group] = the hook's state
 * arrays.
 */
export interface HookCheckpoint {
  name: string;
  options: object;
  ranks: Float32Array[][][];
}

export interface Checkpoint {
  step: number;
  /** Variable names and shapes of the shared layout (model order), to refuse a checkpoint of another model. */
  weights: { name: string; shape: number[] }[];
  /** The shared parameters, one slot (all replicas are identical). */
  params: Float32Array;
  /** The optimizer state of the shared parameters (one slot per state vector). */
  optimizerState: Float32Array[];
  /** Per device, its local head (classifier methods). */
  heads?: HeadState[];
  /** The model's non-trainable weights (model order, one flat array) and their names and shapes. */
  state?: Float32Array;
  stateWeights?: { name: string; shape: number[] }[];
  /** With a communication hook: which, and every rank's state of it (error-feedback residuals, PowerSGD's Q). */
  commHook?: HookCheckpoint;
  /** The run's identity: model, method, optimizer, devices, batch, seed. */
  fingerprint: string;
}
