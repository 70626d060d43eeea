/** `tandem train` arguments -> TrainConfig. Unknown flags and bad values are errors that name the flag. */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { TandemError } from '../errors.js';
import type { TrainConfig } from '../config-types.js';
import { fsReason } from '../output/fs-reason.js';
import { flagNumber, type NumberKind } from './flag-number.js';
import { jsonErrorPlace } from '../json-place.js';

/** verbose: a host other than 0 shows its own progress too (by default host 0 shows the world's; the others only warnings, errors and their final line). */
export interface TrainCliOptions {
  config: TrainConfig;
  json: boolean;
  quiet: boolean;
  verbose: boolean;
  profileSteps?: number;
}

const INTEGER_FLAGS = {
  devices: 'devices',
  hosts: 'hosts',
  'host-rank': 'hostRank',
  'native-threads': 'nativeThreads',
  batch: 'batch',
  steps: 'steps',
  epochs: 'epochs',
  seed: 'seed',
  classes: 'classes',
  'dataset-size': 'datasetSize',
  'split-layer': 'splitLayer',
  embedding: 'embedding',
  'held-out': 'heldOut',
  'eval-samples': 'evalSamples',
  'checkpoint-every': 'checkpointEvery',
  'replica-check-every': 'replicaCheckEvery',
  'keep-checkpoints': 'keepCheckpoints',
  'export-device': 'exportDevice',
  'chunk-floats': 'chunkFloats',
} as const;
const REAL_FLAGS = {
  lr: 'lr',
  momentum: 'momentum',
  beta1: 'beta1',
  beta2: 'beta2',
  epsilon: 'epsilon',
  rho: 'rho',
  decay: 'decay',
  'initial-accumulator': 'initialAccumulatorValue',
  scale: 'scale',
  margin: 'margin',
  'sample-rate': 'sampleRate',
  'stop-grace-ms': 'stopGraceMs',
  'stall-timeout-ms': 'stallTimeoutMs',
  'time-share': 'timeShare',
  'param-share': 'paramShare',
  'bucket-mb': 'bucketCapMB',
  'first-bucket-mb': 'firstBucketMB',
} as const;
const NUMBER_FLAGS = { ...INTEGER_FLAGS, ...REAL_FLAGS };
/** --powersgd-rank etc.: fields of commHookOptions. */
const HOOK_NUMBER_FLAGS = {
  'powersgd-rank': ['rank', 'integer'],
  'powersgd-start-step': ['startStep', 'integer'],
  'powersgd-min-compression': ['minCompressionRate', 'real'],
} as const;
/** The flags that may be given more than once: each adds to a list. Every other flag is given once. */
const REPEATABLE = new Set(['plugin']);
const STRING_FLAGS = {
  model: 'model',
  data: 'data',
  backend: 'backend',
  optimizer: 'optimizer',
  strategy: 'strategy',
  'all-reduce': 'allReduce',
  transport: 'transport',
  'comm-hook': 'commHook',
  'batch-norm': 'batchNorm',
  'forward-wait': 'forwardWait',
  loss: 'loss',
  out: 'out',
  method: 'method',
  head: 'head',
  'on-nan': 'onNan',
  'checkpoint-dir': 'checkpointDir',
  resume: 'resume',
  link: 'link',
  'exchange-order': 'exchangeOrder',
  trace: 'trace',
  rendezvous: 'rendezvous',
  'local-update': 'localUpdate',
} as const;

/** The flag that sets each config field (`commHookOptions.rank`: --powersgd-rank), for messages that name a field. */
const FLAG_OF_FIELD = new Map<string, string>([
  ...Object.entries({ ...NUMBER_FLAGS, ...STRING_FLAGS }).map(([flag, field]) => [field, flag] as [string, string]),
  ...Object.entries(HOOK_NUMBER_FLAGS).map(([flag, [field]]) => [`commHookOptions.${field}`, flag] as [string, string]),
  ['imageSize', 'image-size'],
  ['exportClassifier', 'export-classifier'],
  ['centered', 'centered'],
  ['nesterov', 'nesterov'],
  ['nativeFusion', 'no-native-fusion'],
  ['plugins', 'plugin'],
  ['commHookOptions.errorFeedback', 'no-error-feedback'],
  ['commHookOptions.warmStart', 'no-warm-start'],
]);

/**
 * A message of the library (`config.devices: must be …`) as the CLI shows it: the flag first, then the field
 * (`--devices (config.devices): must be …`). Messages that name no field with a flag are unchanged.
 *
 * @example
 * withFlagName('config.lr: must be > 0, got -1') // '--lr (config.lr): must be > 0, got -1'
 */
export function withFlagName(message: string): string {
  const m = /^config\.([A-Za-z]+(?:\.[A-Za-z]+)?)(\[\d+\])?([: ])/.exec(message);
  if (!m) return message;
  const flag = FLAG_OF_FIELD.get(m[1]);
  return flag ? `--${flag} (${message.slice(0, m[0].length - 1)})${message.slice(m[0].length - 1)}` : message;
}

/** `command` profile reads --steps as the number of measured steps, not training steps. */
export function parseTrainArgs(argv: string[], command: 'train' | 'profile' = 'train'): TrainCliOptions {
  const options: Record<string, { type: 'string' | 'boolean' }> = {
    config: { type: 'string' },
    json: { type: 'boolean' },
    quiet: { type: 'boolean' },
    verbose: { type: 'boolean' },
    'image-size': { type: 'string' },
    'export-classifier': { type: 'boolean' },
    centered: { type: 'boolean' },
    nesterov: { type: 'boolean' },
    'no-native-fusion': { type: 'boolean' },
    'no-error-feedback': { type: 'boolean' },
    'no-warm-start': { type: 'boolean' },
  };
  const multiple: Record<string, { type: 'string'; multiple: true }> = { plugin: { type: 'string', multiple: true } };
  for (const f of [...Object.keys(NUMBER_FLAGS), ...Object.keys(STRING_FLAGS), ...Object.keys(HOOK_NUMBER_FLAGS)])
    options[f] = { type: 'string' };
  let parsed: { values: FlagValues; tokens: FlagToken[] };
  try {
    parsed = parseArgs({
      args: withNegativeNumbers(argv),
      options: { ...options, ...multiple },
      allowPositionals: false,
      strict: true,
      tokens: true,
    });
  } catch (err) {
    throw new TandemError('BAD_CONFIG', `tandem ${command}: ${(err as Error).message}. See tandem --help.`);
  }
  refuseRepeats(parsed.tokens);
  const { values } = parsed;
  const config: TrainConfig = typeof values.config === 'string' ? readConfigFile(values.config) : {};
  const c = config as Record<string, unknown>;
  numbers(values, INTEGER_FLAGS, 'integer', c);
  numbers(values, REAL_FLAGS, 'real', c);
  for (const [flag, key] of Object.entries(STRING_FLAGS)) if (typeof values[flag] === 'string') c[key] = values[flag];
  if (Array.isArray(values.plugin)) c.plugins = [...((c.plugins as string[] | undefined) ?? []), ...values.plugin];
  if (values['export-classifier'] === true) c.exportClassifier = true;
  if (values.centered === true) c.centered = true;
  if (values.nesterov === true) c.nesterov = true;
  if (values['no-native-fusion'] === true) c.nativeFusion = false;
  hookOptions(values, c);
  if (typeof values['image-size'] === 'string') {
    const text = values['image-size'];
    if (!/^\d+([x,]\d+){1,2}$/.test(text))
      throw new TandemError('BAD_CONFIG', `--image-size must look like 32x32 or 32x32x3, got '${text}'`);
    c.imageSize = text.split(/[x,]/).map(Number);
  }
  if (command === 'train') refuseOutputsWithoutOut(config);
  let profileSteps: number | undefined;
  if (command === 'profile' && c.steps !== undefined) {
    profileSteps = c.steps as number;
    if (!Number.isInteger(profileSteps) || profileSteps < 1)
      throw new TandemError(
        'BAD_CONFIG',
        `tandem profile --steps (measured steps) must be an integer >= 1, got ${profileSteps}`,
      );
    delete c.steps;
  }
  return {
    config,
    json: values.json === true,
    quiet: values.quiet === true,
    verbose: values.verbose === true,
    profileSteps,
  };
}

type FlagValues = Record<string, string | boolean | string[] | undefined>;
/** A flag as parseArgs read it (`tokens: true`): its name and its value (undefined for a boolean flag). */
interface FlagToken {
  kind: string;
  name?: string;
  value?: string;
}

/** The `flags` given in `values` as numbers of `kind`, into `c` under their keys. */
function numbers(
  values: FlagValues,
  flags: Record<string, string>,
  kind: NumberKind,
  c: Record<string, unknown>,
): void {
  for (const [flag, key] of Object.entries(flags)) {
    const v = values[flag];
    if (typeof v === 'string') c[key] = flagNumber(flag, v, kind);
  }
}

/** Each flag once, but the REPEATABLE ones: parseArgs keeps the last of two values, and the first would be dropped unsaid. */
function refuseRepeats(tokens: FlagToken[]): void {
  const first = new Map<string, string | undefined>();
  for (const { kind, name, value } of tokens) {
    if (kind !== 'option' || name === undefined || REPEATABLE.has(name)) continue;
    if (!first.has(name)) {
      first.set(name, value);
      continue;
    }
    const values = value === undefined ? '' : ` ('${first.get(name)}', then '${value}')`;
    throw new TandemError(
      'BAD_CONFIG',
      `--${name} is given twice${values}: give it once (only --${[...REPEATABLE].join(', --')} may repeat)`,
    );
  }
}

/** What `train` writes only into --out: without it the run would compute it and write it nowhere. */
function refuseOutputsWithoutOut(config: TrainConfig): void {
  if (config.exportClassifier === true && config.out === undefined) {
    throw new TandemError(
      'BAD_CONFIG',
      '--export-classifier writes the full classifier into --out DIR (as DIR/classifier), and no --out was given: ' +
        'add --out DIR, or leave out --export-classifier',
    );
  }
}

/** --powersgd-* / --no-error-feedback / --no-warm-start into config.commHookOptions. */
function hookOptions(values: FlagValues, c: Record<string, unknown>): void {
  const o: Record<string, unknown> = { ...((c.commHookOptions as Record<string, unknown> | undefined) ?? {}) };
  for (const [flag, [key, kind]] of Object.entries(HOOK_NUMBER_FLAGS)) {
    const v = values[flag];
    if (typeof v === 'string') o[key] = flagNumber(flag, v, kind);
  }
  if (values['no-error-feedback'] === true) o.errorFeedback = false;
  if (values['no-warm-start'] === true) o.warmStart = false;
  if (Object.keys(o).length > 0) c.commHookOptions = o;
}

/** `--devices -1` as `--devices=-1`: parseArgs would read "-1" as an option and call the argument ambiguous. */
function withNegativeNumbers(argv: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i].startsWith('--') ? argv[i].slice(2) : '';
    if (flag in NUMBER_FLAGS && /^-(\d|\.\d|Infinity)/.test(argv[i + 1] ?? '')) out.push(`${argv[i]}=${argv[++i]}`);
    else out.push(argv[i]);
  }
  return out;
}

/** A `--config` file: JSON holding one object of train options; anything else is named with what was found. */
function readConfigFile(file: string): TrainConfig {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new TandemError('BAD_CONFIG', `--config ${file}: cannot read it: ${fsReason(err)}`, undefined, {
      cause: err,
    });
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    const place = jsonErrorPlace(text, err);
    const found =
      text.trim() === '' ? 'an empty file' : `invalid JSON${place ? ` at ${place}` : ''} (${(err as Error).message})`;
    throw new TandemError(
      'BAD_CONFIG',
      `--config ${file}: expected a JSON object of train options (e.g. {"model": "mlp", "devices": 2}), found ${found}`,
    );
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    const found =
      parsed === null ? 'null' : Array.isArray(parsed) ? 'an array' : `${typeof parsed} ${JSON.stringify(parsed)}`;
    throw new TandemError(
      'BAD_CONFIG',
      `--config ${file}: expected a JSON object of train options (e.g. {"model": "mlp", "devices": 2}), found ${found}`,
    );
  }
  return parsed as TrainConfig;
}
