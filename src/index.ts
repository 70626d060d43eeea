/**
 * tandem: train TensorFlow.js models on several devices at once.
 *
 * The public API: {@link train}, {@link start} and {@link startTraining} run a job from a {@link TrainConfig}; the
 * registries (`registerTransport`, `registerMethod`, `registerEngine`, `registerCommHook`, `registerOptimizer`,
 * `registerOptions`) take a plugin's parts; the
 * rest are the types those take and return, and the helpers a plugin or a strategy is written with. The names marked
 * internal further down are exported for tandem's own tests and benches: they are not part of the API and may change
 * in any release (TypeDoc leaves them out of the reference).
 *
 * @packageDocumentation
 */
export { train, start, startTraining } from './trainer/train.js';
export { fit } from './fit/fit.js';
export type { FitArgs, FitOptions, FitY } from './fit/fit.js';
export { fitDataset } from './fit/fit-dataset.js';
export type { FitDatasetArgs } from './fit/fit-dataset.js';
export { evaluate } from './fit/evaluate.js';
export type { EvaluateArgs } from './fit/evaluate.js';
export { earlyStopping, EarlyStoppingWithRestore } from './fit/early-stopping.js';
export type { EarlyStoppingArgs } from './fit/early-stopping.js';
export { bestCheckpoints, BestCheckpoints } from './fit/best-checkpoints.js';
export type { BestCheckpointsArgs, KeptEpoch } from './fit/best-checkpoints.js';
export type { RunEvent } from './monitor/run-event.js';
export {
  timelineSvg,
  timelinePng,
  spansFromChromeTrace,
  overlapShare,
  SPAN_COLOURS,
} from './monitor/timeline-picture.js';
export type { TimelineOptions } from './monitor/timeline-picture.js';
export { DEFAULT_STEP_RANGE, selectSteps, parseStepRange } from './monitor/step-range.js';
export type { StepRange, StepSelection } from './monitor/step-range.js';
export type {
  EpochEnd,
  HostStepShare,
  RunHosts,
  TrainSummary,
  TrainHooks,
  StepMetrics,
  TrainingHandle,
} from './trainer/train.js';
export type { StepValues } from './monitor/step-values.js';
export type { AutoSummary } from './trainer/run-types.js';
export type { AutoChoice } from './profiling/choose-strategy.js';
export { resolveConfig, checkConfig, prepareConfig } from './config.js';
export type { TrainConfig, ResolvedConfig, CheckedConfig } from './config.js';
export { registerOptions } from './options/option-registry.js';
export { registerStepProbe, stepProbeNames } from './plugins/step-probes.js';
export type { StepProbe, ProbePoint, ProbeThread, PluginValues } from './plugins/step-probes.js';
export { OPTION_GROUPS } from './options/declaration.js';
export type {
  OptionDeclaration,
  OptionTable,
  OptionSection,
  AnyOptionTable,
  OptionGroup,
  OptionKind,
  HostAgreement,
} from './options/declaration.js';
export { registerOptimizer, getOptimizer, optimizerNames } from './optim/optimizer-registry.js';
export { defineOptimizer, real, flag } from './optim/optimizer-definition.js';
export type {
  OptimizerDefinition,
  HyperOption,
  HyperOptions,
  HyperValue,
  ResolvedOptimizer,
  FlatUpdate,
} from './optim/optimizer-definition.js';
export type { OptimizerConfig, OptimizerName } from './optim/flat-optimizer.js';
export type { OptimizerWeights, NamedValues } from './optim/optimizer-weights.js';
export { TandemError } from './errors.js';
export type { TandemErrorCode, SerializedError } from './errors.js';
export { BACKENDS } from './engine/backend.js';
export type { BackendName } from './engine/backend.js';
export { PRECISIONS } from './engine/engine-options.js';
export type { Precision } from './engine/engine-options.js';
export { BUILTIN_MODELS } from './model/builtin-models.js';
export type { ModelFactory, ModelOptions } from './model/builtin-models.js';
export type { Dataset, DatasetFactory, DatasetOptions, DataModuleOptions, TfDataset } from './data/dataset.js';
export { hostShare } from './data/host-share.js';
export type { HostShareOptions } from './data/host-share.js';
export { REDUCE_OPS, ALL_REDUCE_KINDS } from './collectives/collective.js';
export type {
  Collective,
  BlockingCollective,
  CollectiveEnv,
  ReduceOp,
  AllReduceKind,
  SlotSet,
} from './collectives/collective.js';
export {
  registerTransport,
  getTransport,
  transportNames,
  openCollective,
  DEFAULT_TRANSPORT,
} from './collectives/transport-registry.js';
export type {
  Transport,
  TransportOptions,
  CommunicatorSpec,
  RankHandle,
  PreparedCommunicator,
  SlotBuffer,
} from './collectives/transport.js';
export { registerMethod, getMethod, methodNames } from './methods/method-registry.js';
export type {
  TrainingMethod,
  DeviceMethod,
  DeviceMethodContext,
  StepLoss,
  MethodSummary,
  MethodSummaryContext,
  MethodResolveContext,
} from './methods/training-method.js';
export type { ComputeConfig, CommConfig } from './actors/config-slices.js';
export { registerEngine, getEngine, engineNames } from './engine/engine-registry.js';
export { describeEngineDevice } from './engine/engine.js';
export type { Engine, EngineCapabilities, EngineDevice, EngineStartOptions, KernelSite } from './engine/engine.js';
export { singleProcess, worldSize, globalRank, localRanks, describeProcess } from './world/topology.js';
export type { Topology, ProcessKind } from './world/topology.js';
export { findGpus } from './world/gpu-inventory.js';
export type { GpuInventory, PciGpu, GpuVendor, FindGpusOptions } from './world/gpu-inventory.js';
export { planGpus, GPU_ENV } from './world/gpu-pinning.js';
export type { GpuPin, GpuPlan, PlanOptions } from './world/gpu-pinning.js';
export { fileModelHandler } from './model/file-model-handler.js';
export { trainReference } from './trainer/reference.js';
export {
  STRATEGIES,
  MAX_GROUPS,
  exchangeGroups,
  sequentialGroups,
  twoGroups,
  perLayerGroups,
  bucketRange,
  defaultSplitLayer,
} from './pipeline/strategy.js';
export type { StrategyName, StrategySpec, CustomStrategy, StrategyOptions } from './pipeline/strategy.js';
export { EXCHANGE_ORDERS, DEFAULT_CHUNK_FLOATS } from './pipeline/priority-schedule.js';
export type { ExchangeOrder } from './pipeline/priority-schedule.js';
export { layersOf } from './model/parameter-layout.js';
export type { ParameterLayout, ParameterGroup, ParameterSpec, LayerRange } from './model/parameter-layout.js';
export { parseLink } from './pipeline/link-model.js';
export type { LinkModel } from './pipeline/link-model.js';
export { registerCommHook, getCommHook, commHookNames } from './pipeline/comm-hooks.js';
export { COMM_HOOKS, DEFAULT_COMM_HOOK_OPTIONS } from './pipeline/comm-hook.js';
export type {
  CommHook,
  CommHookName,
  CommHookOptions,
  GradBucket,
  BucketInfo,
  BucketVariable,
} from './pipeline/comm-hook.js';
export { compressHook, compressWithFeedback } from './pipeline/hooks/compress-hook.js';
export { POWER_SGD_HOOK } from './pipeline/hooks/power-sgd.js';
export type { HalfFormat } from './pipeline/hooks/half-float.js';
export type { Span, SpanKind } from './monitor/span.js';
export { chromeTrace, writeChromeTrace } from './monitor/chrome-trace.js';
export { tensorBoard } from './monitor/tensorboard.js';
export type { TensorBoardCallbackArgs } from './monitor/tensorboard.js';

// Internals: exported for the tests and benches only, not part of the API (left out of the API reference).
/** @internal */
export { serializeError, deserializeError } from './errors.js';
/** @internal */
export { installFastGradients } from './engine/fast-gradients.js';
/** @internal */
export { startBackend, flatArithmeticFor } from './engine/backend.js';
/** @internal */
export { SharedMemoryCollective, SHARED_MEMORY_TRANSPORT } from './collectives/shared-memory-transport.js';
/** @internal */
export { shardOf, reduceSlotsInto } from './collectives/reduce-slots.js';
/** @internal */
export type { SlotReducer } from './collectives/collective.js';
/** @internal */
export { chunksOf, runPriorityStep } from './pipeline/priority-schedule.js';
/** @internal */
export type { ExchangeChunk, PriorityStepIo } from './pipeline/priority-schedule.js';
/** @internal */
export { layoutParameters } from './model/parameter-layout.js';
/** @internal */
export { allReduceWireMs } from './pipeline/link-model.js';
/** @internal */
export { completeGroups } from './pipeline/operators/complete-groups.js';
/** @internal */
export { handOff } from './pipeline/operators/hand-off.js';
/** @internal */
export { allReduceGroup } from './pipeline/operators/all-reduce-group.js';
/** @internal */
export { commHookGroup } from './pipeline/operators/comm-hook-group.js';
/** @internal */
export { HookStates, type RankHookState } from './pipeline/hook-states.js';
/** @internal */
export type { ResolvedCommHook } from './pipeline/resolve-comm-hook.js';
/** @internal */
export { compressibleShape } from './pipeline/hooks/power-sgd.js';
/** @internal */
export { toFp16, toBf16, decodeTable, encodeHalves, packedWords, FP16_MAX } from './pipeline/hooks/half-float.js';
/** @internal */
export { CountingCollective } from './pipeline/counting-collective.js';
/** @internal */
export { emulateLink } from './pipeline/operators/emulate-link.js';
/** @internal */
export { applyGroupUpdate } from './pipeline/operators/apply-group-update.js';
/** @internal */
export { publishApplied } from './pipeline/operators/publish-applied.js';
/** @internal */
export type { GradientReady, GroupReady, GroupExchange } from './pipeline/events.js';
/** @internal */
export { backwardWithGradientReady } from './engine/gradient-tape.js';
