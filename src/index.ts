// The public API of tandem, re-exported explicitly.
export { train } from './trainer/train.js';
export type { TrainSummary, TrainHooks, StepMetrics } from './trainer/train.js';
export { resolveConfig } from './config.js';
export type { TrainConfig, ResolvedConfig, FaultInjection } from './config.js';
export { TandemError } from './errors.js';
export type { TandemErrorCode } from './errors.js';
export { installFastGradients } from './engine/fast-gradients.js';
export { startBackend, BACKENDS } from './engine/backend.js';
export type { BackendName } from './engine/backend.js';
export { BUILTIN_MODELS } from './model/builtin-models.js';
export type { ModelFactory, ModelOptions } from './model/builtin-models.js';
export type { Dataset, DatasetFactory, DatasetOptions } from './data/dataset.js';
export { SharedMemoryCollective, shardOf } from './collectives/shared-memory-collective.js';
export type { Collective, AllReduceKind, SlotSet } from './collectives/collective.js';
export { fileModelHandler } from './trainer/model-files.js';
export { trainReference } from './trainer/reference.js';
export { STRATEGIES } from './pipeline/strategy.js';
export type { StrategyName } from './pipeline/strategy.js';
