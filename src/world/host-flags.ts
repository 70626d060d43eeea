/**
 * What every host of a run must share: each option declared `hosts: 'same'` (options/declaration.ts), by its
 * resolved value — a default and the same value given explicitly agree — and what the run derives from them (the
 * samples' shape, the training samples). An option decides for itself whether the hosts must agree: one that changes
 * the math (replicas that no longer equal one engine on the same global batch), the world's shape or its protocol, or
 * could leave a host waiting in a phase the others never reach. Each host publishes its flags when it joins the
 * rendezvous store and compares them with host 0's (HostChannel.agreeOnFlags): a difference is BAD_CONFIG, naming
 * the option and both values, before any step. Options declared `own` (paths, outputs, dashboards, the host's rank,
 * its cores) may differ between machines and are not compared.
 */
import type { ResolvedConfig } from '../config-types.js';
import { TandemError } from '../errors.js';
import { scheduleIdentity } from '../optim/lr-schedule.js';
import { sameOnEveryHost, type DeclaredOption } from '../options/declaration.js';
import { declaredOptions, TRAIN_CONFIG_SECTIONS } from '../options/option-registry.js';

export type HostFlags = Record<string, string>;

/** What a host's flags are read from: its resolved config, whether its strategy is auto, an elastic run's min hosts. */
interface FlagSource {
  cfg: ResolvedConfig;
  auto: boolean;
  minHosts?: number;
}
type Read = (x: FlagSource) => unknown;

/** Options read at the same key of the resolved config. */
const AT_KEY = [
  'classWeight',
  'metrics',
  'classes',
  'datasetSize',
  'shuffle',
  'partialBatch',
  'evalSamples',
  'devices',
  'transport',
  'allReduce',
  'localUpdate',
  'backend',
  'precision',
  'nativeFusion',
  'batch',
  'accumulate',
  'steps',
  'seed',
  'link',
  'batchNorm',
  'method',
  'checkpointEvery',
  'onNan',
  'replicaCheckEvery',
] as const satisfies readonly (keyof ResolvedConfig)[];

const csv = ({ cfg }: FlagSource) => (cfg.data.file?.kind === 'csv' ? cfg.data.file : undefined);

/** Options resolved into another shape, or not into the config (`--strategy auto`: auto's hook is host 0's pick). */
const READERS: Readonly<Record<string, Read>> = {
  loss: ({ cfg }) => cfg.loss ?? 'from the model',
  labelColumn: x => csv(x)?.labelColumn,
  featureColumns: x => csv(x)?.featureColumns ?? 'every column but the label',
  validationSplit: ({ cfg }) => cfg.epochLogs?.validation ?? false,
  earlyStopping: ({ cfg }) => cfg.epochLogs?.earlyStopping,
  hosts: ({ cfg }) => cfg.topology.processes,
  minHosts: ({ minHosts }) => minHosts,
  optimizer: ({ cfg }) => cfg.optimizer.kind,
  lrSchedule: ({ cfg }) => scheduleIdentity(cfg.lrSchedule) ?? 'constant',
  strategy: ({ cfg, auto }) => (auto ? 'auto' : cfg.strategy),
  splitLayer: ({ cfg }) => cfg.strategyOptions.splitLayer,
  bucketCapMB: ({ cfg }) => cfg.strategyOptions.bucketCapMB,
  firstBucketMB: ({ cfg }) => cfg.strategyOptions.firstBucketMB,
  exchangeOrder: ({ cfg }) => cfg.exchange,
  commHook: ({ cfg, auto }) => (auto ? undefined : (cfg.commHook?.name ?? 'none')),
  resume: ({ cfg }) => cfg.resume !== undefined, // whether the run resumes; where from is host 0's to read
};

/** Options whose resolved value a derived flag holds (`--epochs` becomes the steps). */
const DERIVED: Readonly<Record<string, Read>> = {
  'sample shape': ({ cfg }) => cfg.sampleShape,
  'training samples': ({ cfg }) => cfg.trainSize,
  // epoch logs gather every host's share at each epoch's end: a host without them would leave the others waiting
  'epoch logs': ({ cfg }) => cfg.epochLogs !== undefined,
};
const COMPARED_AS: Readonly<Record<string, string>> = {
  imageSize: 'sample shape',
  heldOut: 'training samples',
  epochs: 'steps',
  warmupSteps: 'lrSchedule',
  warmupFrom: 'lrSchedule',
  lrScheduleSteps: 'lrSchedule',
  chunkFloats: 'exchangeOrder',
};

const BUILT_IN = new Set(TRAIN_CONFIG_SECTIONS.map(s => s.name));

/**
 * How one option is compared: under `name`, by `read` (absent: a derived flag holds it). A built-in section's
 * option with no way to read it is `undefined` (test/host-agreement.test.ts keeps that from happening); a part's
 * option (a method's, a hook's, a transport's, an engine's, a plugin's) is read where its values go.
 */
export function comparison(o: DeclaredOption): { name: string; read?: Read } | undefined {
  const { key, path } = o;
  if (o.into === 'commHookOptions')
    return { name: path, read: ({ cfg }) => (cfg.commHook?.options as Record<string, unknown> | undefined)?.[key] };
  if (COMPARED_AS[key] !== undefined) return { name: COMPARED_AS[key] };
  const reader = READERS[key];
  if (reader) return { name: path, read: reader };
  if ((AT_KEY as readonly string[]).includes(key))
    return { name: path, read: ({ cfg }) => (cfg as unknown as Record<string, unknown>)[key] };
  if (o.section === 'optimizer')
    return { name: path, read: ({ cfg }) => (cfg.optimizer as unknown as Record<string, unknown>)[key] };
  if (BUILT_IN.has(o.section)) return undefined;
  return {
    name: path,
    read: ({ cfg }) => {
      const classifier = cfg.classifier as Record<string, unknown> | undefined;
      return classifier && key in classifier ? classifier[key] : cfg.pluginOptions[key];
    },
  };
}

/**
 * This host's flags: every option every host must share (by its key, `commHookOptions.rank` for a hook's), and the
 * derived ones. `auto`: the run's strategy is `--strategy auto` (auto's choices, hook included, are host 0's);
 * `minHosts`: an elastic run's --min-hosts (a host without it would end at a loss its peers go on from).
 */
export function hostFlags(cfg: ResolvedConfig, auto: boolean, minHosts?: number): HostFlags {
  const x: FlagSource = { cfg, auto, minHosts };
  const out: HostFlags = {};
  const put = (name: string, value: unknown) => (out[name] = value === undefined ? 'none' : JSON.stringify(value));
  for (const [name, read] of Object.entries(DERIVED)) put(name, read(x));
  for (const option of declaredOptions()) {
    if (!sameOnEveryHost(option.declaration)) continue;
    const how = comparison(option);
    if (how === undefined)
      throw new Error(`host-flags.ts: option ${option.path} is declared the same on every host, and never read`);
    if (how.read) put(how.name, how.read(x));
  }
  return out;
}

/** `strategy: "auto" here, "sequential" on host 1`, one per flag that differs (either side's missing ones included). */
export function flagDifferences(mine: HostFlags, theirs: HostFlags, here: string, there: string): string[] {
  // auto's hook is host 0's choice: the strategy names it
  const auto = mine.strategy === '"auto"' || theirs.strategy === '"auto"';
  const names = [...new Set([...Object.keys(mine), ...Object.keys(theirs)])].filter(n => !(auto && n === 'commHook'));
  // other tensors make every layer differ: its settings are news only where the tensors agree
  const otherTensors = mine['model tensors'] !== theirs['model tensors'];
  const differing = names.filter(n => mine[n] !== theirs[n] && !(otherTensors && n.startsWith('model layer ')));
  const shown = differing.map(n => `${n}: ${mine[n] ?? 'not set'} ${here}, ${theirs[n] ?? 'not set'} ${there}`);
  return shown.length > MAX_SHOWN ? [...shown.slice(0, MAX_SHOWN), `and ${shown.length - MAX_SHOWN} more`] : shown;
}

/** Differences a refusal lists (a model of many layers may differ in each). */
const MAX_SHOWN = 6;

/**
 * Host `host`'s flags as `get` reads them from the store: a host that never published them within the setup wait
 * (never started, started with another --host-rank or --rendezvous, or cannot reach the store) is named, with what
 * to check, instead of the store's bare "key 'tandem.host1.flags' was not set".
 */
export async function readHostFlags(get: () => Promise<Buffer>, who: string, me: string): Promise<HostFlags> {
  try {
    return JSON.parse((await get()).toString()) as HostFlags;
  } catch (err) {
    if (!(err instanceof TandemError && err.code === 'STALLED' && /was not set within/.test(err.message))) throw err;
    throw new TandemError(
      'STALLED',
      `${who} did not join the rendezvous in time (${me} waited; ${err.message}): start it with the same command ` +
        `and its own --host-rank and the same --rendezvous, and check that it reaches host 0's address; the wait is ` +
        `the setup watchdog (60 s, or --stall-timeout-ms when longer)`,
    );
  }
}

/**
 * The model a host built, as flags to compare (model paths may differ between machines, the model may not): a host
 * with another model would otherwise exchange gradients of another length and end with other weights, silently, and
 * one whose layers have other settings (model/layer-settings.ts) would train another model on the same tensors.
 */
export function modelFlags(built: {
  weights: { name: string; shape: number[] }[];
  layout: { total: number };
  layers: string[];
}): HostFlags {
  const { weights, layout, layers } = built;
  const shapes = weights.map(w => `${w.name}[${w.shape.join('x')}]`).join(' ');
  const flags: HostFlags = {
    'model parameters': `${layout.total} in ${weights.length} tensors`,
    'model tensors': shapes,
  };
  // the same tensors, other settings (a dropout rate, an activation): each layer its own flag, so only those differ
  layers.forEach((settings, i) => (flags[`model layer ${i}`] = settings));
  return flags;
}
