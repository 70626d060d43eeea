/** `tandem profile`: time the model's layers, decide AlexNet-like, predict each strategy's step time. */
import { train } from '../trainer/train.js';
import { TandemError } from '../errors.js';
import { resolveConfig } from '../config.js';
import { profileModel } from '../profiling/profile-model.js';
import { decideAlexNetLike } from '../profiling/alexnet-like.js';
import { predictStrategies } from '../profiling/cost-model.js';
import { parseTrainArgs } from './parse-train-args.js';
import { profileReport } from './profile-report.js';
import { loadCliPlugins } from './cli-plugins.js';

export async function profileCommand(args: string[]): Promise<number> {
  await loadCliPlugins(args);
  const { config, json, profileSteps } = parseTrainArgs(args, 'profile');
  if ((config.hosts ?? 1) > 1)
    throw new TandemError(
      'BAD_CONFIG',
      'tandem profile runs in one process: leave out --hosts (profile one host, then train with --hosts)',
    );
  const { splitLayer, ...rest } = config; // profile predicts two-group at the split given, as auto takes the others
  const resolved = await resolveConfig({ ...rest, strategy: 'auto', steps: 1 });
  const profile = await profileModel({ ...config, steps: 1 }, train, {
    steps: profileSteps,
  });
  const verdict = decideAlexNetLike(profile.layers, {
    timeShare: config.timeShare ?? 0.25,
    paramShare: config.paramShare ?? 0.25,
  });
  const predictions = predictStrategies(
    profile,
    resolved.devices,
    { ...resolved.strategyOptions, splitLayer },
    resolved.link,
  );
  if (json)
    console.log(
      JSON.stringify({
        profile,
        verdict,
        predictions,
        link: resolved.link ? { ...resolved.link, emulated: true } : undefined,
      }),
    );
  else console.log(profileReport(profile, verdict, predictions, resolved.devices, resolved.link?.label));
  return 0;
}
