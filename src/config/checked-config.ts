/** What the synchronous checks of a train config resolve, for the prepare phase to complete. */
import type { TrainConfig, ResolvedConfig } from '../config-types.js';
import type { BuiltinModel } from '../model/builtin-models.js';

export type CheckedFields = Pick<
  ResolvedConfig,
  | 'topology'
  | 'rendezvous'
  | 'devices'
  | 'backend'
  | 'nativeThreads'
  | 'nativeFusion'
  | 'precision'
  | 'batch'
  | 'accumulate'
  | 'seed'
  | 'strategy'
  | 'strategyOptions'
  | 'exchange'
  | 'link'
  | 'trace'
  | 'allReduce'
  | 'localUpdate'
  | 'transport'
  | 'batchNorm'
  | 'forwardWait'
  | 'plugins'
  | 'out'
  | 'overwrite'
  | 'stallTimeoutMs'
  | 'loaderThreads'
  | 'pluginOptions'
  | 'onNan'
  | 'replicaCheckEvery'
  | 'checkpointEvery'
  | 'checkpointDir'
  | 'resume'
  | 'keepCheckpoints'
  | 'stopGraceMs'
>;

/** The given config, the fields resolved from it alone, and what the prepare phase reads next. */
export interface CheckedConfig {
  readonly config: TrainConfig;
  readonly fields: CheckedFields;
  /** Devices of this process. */
  readonly localDevices: number;
  /** This process writes the model, summary, trace and checkpoints (host 0). */
  readonly writer: boolean;
  readonly modelSource: string;
  readonly builtinModel?: BuiltinModel;
  /** A model module's or model.json's URL. */
  readonly modelUrl?: string;
  readonly dataSource: string;
  /** imageSize as [height, width, channels]. */
  readonly imageShape?: number[];
}
