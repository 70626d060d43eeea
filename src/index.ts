// The public API of tandem, re-exported explicitly.
export { train, start, startTraining } from './trainer/train.js';
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
export type { TrainSummary, TrainHooks, StepMetrics, TrainingHandle } from './trainer/train.js';
export type { AutoSummary } from './trainer/run-types.js';
export type { AutoChoice } from './profiling/choose-strategy.js';
export { resolveConfig } from './config.js';
export type { TrainConfig, ResolvedConfig, FaultInjection } from './config.js';
export { TandemError, serializeError, deserializeError } from './errors.js';
export type { TandemErrorCode, SerializedError } from './errors.js';
export { installFastGradients } from './engine/fast-gradients.js';
export { startBackend, BACKENDS, flatArithmeticFor } from './engine/backend.js';
export type { BackendName } from './engine/backend.js';
export { BUILTIN_MODELS } from './model/builtin-models.js';
export type { ModelFactory, ModelOptions } from './model/builtin-models.js';
export type { Dataset, DatasetFactory, DatasetOptions } from './data/dataset.js';
export { SharedMemoryCollective, SHARED_MEMORY_TRANSPORT } from './collectives/shared-memory-transport.js';
export { shardOf, reduceSlotsInto } from './collectives/reduce-slots.js';
export { REDUCE_OPS, ALL_REDUCE_KINDS } from './collectives/collective.js';
export type {
  Collective,
  BlockingCollective,
  CollectiveEnv,
  ReduceOp,
  AllReduceKind,
  SlotSet,
  SlotReducer,
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
export { EXCHANGE_ORDERS, DEFAULT_CHUNK_FLOATS, chunksOf, runPriorityStep } from './pipeline/priority-schedule.js';
export type { ExchangeOrder, ExchangeChunk, PriorityStepIo } from './pipeline/priority-schedule.js';
export { layersOf, layoutParameters } from './model/parameter-layout.js';
export type { ParameterLayout, ParameterGroup, ParameterSpec, LayerRange } from './model/parameter-layout.js';
export { parseLink, allReduceWireMs } from './pipeline/link-model.js';
export type { LinkModel } from './pipeline/link-model.js';
export { completeGroups } from './pipeline/operators/complete-groups.js';
export { handOff } from './pipeline/operators/hand-off.js';
export { allReduceGroup } from './pipeline/operators/all-reduce-group.js';
export { commHookGroup } from './pipeline/operators/comm-hook-group.js';
export { HookStates, type RankHookState } from './pipeline/hook-states.js';
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
export type { ResolvedCommHook } from './pipeline/resolve-comm-hook.js';
export { compressHook, compressWithFeedback } from './pipeline/hooks/compress-hook.js';
export { POWER_SGD_HOOK, compressibleShape } from './pipeline/hooks/power-sgd.js';
export { toFp16, toBf16, decodeTable, encodeHalves, packedWords, FP16_MAX } from './pipeline/hooks/half-float.js';
export type { HalfFormat } from './pipeline/hooks/half-float.js';
export { CountingCollective } from './pipeline/counting-collective.js';
export { emulateLink } from './pipeline/operators/emulate-link.js';
export { applyGroupUpdate } from './pipeline/operators/apply-group-update.js';
export { publishApplied } from './pipeline/operators/publish-applied.js';
export type { GradientReady, GroupReady, GroupExchange } from './pipeline/events.js';
export { backwardWithGradientReady } from './engine/gradient-tape.js';
export type { Span, SpanKind } from './monitor/span.js';
export { chromeTrace, writeChromeTrace } from './monitor/chrome-trace.js';
