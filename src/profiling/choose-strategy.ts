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

export interface AutoChoice {
  strategy: StrategyName;
  splitLayer?: number;
  reason: string;
  verdict: AlexNetVerdict;
  predictions: Prediction[];
  profile: ModelProfile;
}

/** `runTrial` runs the profiler's calibration run: the trainer passes its own `train`. */
export async function chooseStrategy(config: TrainConfig, runTrial: RunTrial, options: ProfileOptions = {}): Promise<AutoChoice> {
  const resolved = await resolveConfig({ ...config, strategy: 'sequential' });
  const profile = await profileModel(config, runTrial, options);
  const conditions = { timeShare: config.timeShare ?? DEFAULT_CONDITIONS.timeShare, paramShare: config.paramShare ?? DEFAULT_CONDITIONS.paramShare };
  const verdict = decideAlexNetLike(profile.layers, conditions);
  const split = verdict.alexnetLike ? parameterisedSplit(profile.layers, verdict.p) : 0;
  const predictions = predictStrategies(profile, resolved.devices, { ...resolved.strategyOptions, splitLayer: split > 0 ? split : undefined }, resolved.link);
  if (verdict.alexnetLike && split > 0) {
    return { strategy: 'two-group', splitLayer: split, verdict, predictions, profile,
      reason: `AlexNet-like: ${verdict.reason} (${marginSentence(verdict)}); two-group with the FC group = ${verdict.fcGroup.join(', ')}` };
  }
  const fastest = [...predictions].sort((a, b) => a.stepMs - b.stepMs)[0];
  return { strategy: fastest.strategy as StrategyName, verdict, predictions, profile,
    reason: `not AlexNet-like (${verdict.reason}; ${marginSentence(verdict)}); the cost model predicts ${fastest.strategy} fastest at ${fastest.stepMs.toFixed(1)} ms/step` +
      ` (${predictions.map(p => `${p.strategy} ${p.stepMs.toFixed(1)}`).join(', ')})` };
}
