/**
 * `--strategy auto`: profile the model on the devices' engine, decide whether
 * it is AlexNet-like; if so, two-group at p (method A); otherwise the
 * strategy the cost model predicts fastest for this device count and link.
 */
import type { TrainConfig } from '../config-types.js';
import { resolveConfig } from '../config.js';
import { decideAlexNetLike, marginSentence, parameterisedSplit, DEFAULT_CONDITIONS, type AlexNetVerdict } from './alexnet-like.js';
import { predictStrategies, type Prediction } from './cost-model.js';
import { profileModel, type ProfileOptions, type RunTrial } from './profile-model.js';
import type { ModelProfile } from './layer-profile.js';
import type { StrategyName } from '../pipeline/strategy.js';

/** resolveConfig's default global batch. */
const DEFAULT_BATCH = 32;

export interface AutoChoice {
  strategy: StrategyName;
  splitLayer?: number;
  reason: string;
  verdict: AlexNetVerdict;
  predictions: Prediction[];
  profile: ModelProfile;
}

/**
 * `runTrial` runs the profiler's calibration run: the trainer passes its own `train`. Several hosts: this host's
 * devices are profiled in one process (each device's batch as in the run), and the cost model predicts for the world.
 */
export async function chooseStrategy(config: TrainConfig, runTrial: RunTrial, options: ProfileOptions = {}): Promise<AutoChoice> {
  const resolved = await resolveConfig({ ...config, strategy: 'sequential' });
  const profile = await profileModel(thisHostAlone(config), runTrial, options);
  const conditions = { timeShare: config.timeShare ?? DEFAULT_CONDITIONS.timeShare, paramShare: config.paramShare ?? DEFAULT_CONDITIONS.paramShare };
  const verdict = decideAlexNetLike(profile.layers, conditions);
  const split = verdict.alexnetLike ? parameterisedSplit(profile.layers, verdict.p) : 0;
  const predictions = predictStrategies(profile, resolved.devices, { ...resolved.strategyOptions, splitLayer: split > 0 ? split : undefined }, resolved.link);
  if (verdict.alexnetLike && split > 0) {
    return { strategy: 'two-group', splitLayer: split, verdict, predictions, profile,
      reason: `AlexNet-like: ${verdict.reason} (${marginSentence(verdict)}); two-group with the FC group = ${verdict.fcGroup.join(', ')}` };
  }
  const fastest = [...predictions].sort((a, b) => a.stepMs - b.stepMs)[0];
  const where = resolved.topology.processes > 1
    ? ` for ${resolved.devices} devices (${resolved.topology.processes} hosts × ${resolved.topology.localDevices}; profiled on this host's ${resolved.topology.localDevices})` : '';
  return { strategy: fastest.strategy as StrategyName, verdict, predictions, profile,
    reason: `not AlexNet-like (${verdict.reason}; ${marginSentence(verdict)}); the cost model predicts ${fastest.strategy} fastest${where} at ${fastest.stepMs.toFixed(1)} ms/step` +
      ` (${predictions.map(p => `${p.strategy} ${p.stepMs.toFixed(1)}`).join(', ')})` };
}

/** The run as one process of this host's devices alone, each with the batch it trains in the run (no hosts, no rendezvous, its own transport). */
function thisHostAlone(config: TrainConfig): TrainConfig {
  const hosts = config.hosts ?? 1;
  if (hosts === 1) return config;
  const { hosts: _hosts, hostRank: _rank, rendezvous: _rendezvous, transport: _transport, ...alone } = config;
  void _hosts; void _rank; void _rendezvous; void _transport;
  return { ...alone, batch: (config.batch ?? DEFAULT_BATCH) / hosts };
}
