/** `tandem train` arguments -> TrainConfig. Unknown flags and bad values are errors that name the flag. */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { TandemError } from '../errors.js';
import type { TrainConfig } from '../config-types.js';
import { fsReason } from '../output/fs-reason.js';

/** verbose: a host other than 0 shows its own progress too (by default host 0 shows the world's; the others only warnings, errors and their final line). */
export interface TrainCliOptions { config: TrainConfig; json: boolean; quiet: boolean; verbose: boolean; profileSteps?: number }

const NUMBER_FLAGS = { devices: 'devices', hosts: 'hosts', 'host-rank': 'hostRank', 'native-threads': 'nativeThreads', batch: 'batch', steps: 'steps', epochs: 'epochs', lr: 'lr', momentum: 'momentum', seed: 'seed', classes: 'classes', 'dataset-size': 'datasetSize',
  'split-layer': 'splitLayer', embedding: 'embedding', scale: 'scale', margin: 'margin', 'sample-rate': 'sampleRate',
  'held-out': 'heldOut', 'eval-samples': 'evalSamples', 'checkpoint-every': 'checkpointEvery', 'replica-check-every': 'replicaCheckEvery', 'keep-checkpoints': 'keepCheckpoints', 'stop-grace-ms': 'stopGraceMs', 'stall-timeout-ms': 'stallTimeoutMs', 'export-device': 'exportDevice', 'time-share': 'timeShare', 'param-share': 'paramShare', 'bucket-mb': 'bucketCapMB', 'first-bucket-mb': 'firstBucketMB', 'chunk-floats': 'chunkFloats' } as const;
/** --powersgd-rank etc.: fields of commHookOptions. */
const HOOK_NUMBER_FLAGS = { 'powersgd-rank': 'rank', 'powersgd-start-step': 'startStep', 'powersgd-min-compression': 'minCompressionRate' } as const;
const STRING_FLAGS = { model: 'model', data: 'data', backend: 'backend', optimizer: 'optimizer', strategy: 'strategy', 'all-reduce': 'allReduce', transport: 'transport', 'comm-hook': 'commHook', 'batch-norm': 'batchNorm', 'forward-wait': 'forwardWait', loss: 'loss', out: 'out', method: 'method', head: 'head', 'on-nan': 'onNan', 'checkpoint-dir': 'checkpointDir', resume: 'resume', link: 'link', 'exchange-order': 'exchangeOrder', trace: 'trace', rendezvous: 'rendezvous' } as const;

/** `command` profile reads --steps as the number of measured steps, not training steps. */
export function parseTrainArgs(argv: string[], command: 'train' | 'profile' = 'train'): TrainCliOptions {
  const options: Record<string, { type: 'string' | 'boolean' }> = { config: { type: 'string' }, json: { type: 'boolean' }, quiet: { type: 'boolean' }, verbose: { type: 'boolean' },
    'image-size': { type: 'string' }, 'export-classifier': { type: 'boolean' }, 'no-native-fusion': { type: 'boolean' },
    'no-error-feedback': { type: 'boolean' }, 'no-warm-start': { type: 'boolean' } };
  const multiple: Record<string, { type: 'string'; multiple: true }> = { plugin: { type: 'string', multiple: true } };
  for (const f of [...Object.keys(NUMBER_FLAGS), ...Object.keys(STRING_FLAGS), ...Object.keys(HOOK_NUMBER_FLAGS)]) options[f] = { type: 'string' };
  let values: Record<string, string | boolean | string[] | undefined>;
  try {
    ({ values } = parseArgs({ args: withNegativeNumbers(argv), options: { ...options, ...multiple }, allowPositionals: false, strict: true }));
  } catch (err) {
    throw new TandemError('BAD_CONFIG', `tandem ${command}: ${(err as Error).message}. See tandem --help.`);
  }
  const config: TrainConfig = typeof values.config === 'string' ? readConfigFile(values.config) : {};
  const c = config as Record<string, unknown>;
  for (const [flag, key] of Object.entries(NUMBER_FLAGS)) {
    const v = values[flag];
    if (typeof v !== 'string') continue;
    const n = Number(v);
    if (v.trim() === '' || !Number.isFinite(n)) throw new TandemError('BAD_CONFIG', `--${flag} must be a number, got '${v}'`);
    c[key] = n;
  }
  for (const [flag, key] of Object.entries(STRING_FLAGS)) if (typeof values[flag] === 'string') c[key] = values[flag];
  if (Array.isArray(values.plugin)) c.plugins = [...((c.plugins as string[] | undefined) ?? []), ...values.plugin];
  if (values['export-classifier'] === true) c.exportClassifier = true;
  if (values['no-native-fusion'] === true) c.nativeFusion = false;
  hookOptions(values, c);
  if (typeof values['image-size'] === 'string') {
    const parts = values['image-size'].split(/[x,]/).map(Number);
    if (parts.some(p => !Number.isInteger(p))) throw new TandemError('BAD_CONFIG', `--image-size must look like 32x32 or 32x32x3, got '${values['image-size']}'`);
    c.imageSize = parts;
  }
  let profileSteps: number | undefined;
  if (command === 'profile' && c.steps !== undefined) {
    profileSteps = c.steps as number;
    if (!Number.isInteger(profileSteps) || profileSteps < 1) throw new TandemError('BAD_CONFIG', `tandem profile --steps (measured steps) must be an integer >= 1, got ${profileSteps}`);
    delete c.steps;
  }
  return { config, json: values.json === true, quiet: values.quiet === true, verbose: values.verbose === true, profileSteps };
}

/** --powersgd-* / --no-error-feedback / --no-warm-start into config.commHookOptions. */
function hookOptions(values: Record<string, string | boolean | string[] | undefined>, c: Record<string, unknown>): void {
  const o: Record<string, unknown> = { ...((c.commHookOptions as Record<string, unknown> | undefined) ?? {}) };
  for (const [flag, key] of Object.entries(HOOK_NUMBER_FLAGS)) {
    const v = values[flag];
    if (typeof v !== 'string') continue;
    if (v.trim() === '' || !Number.isFinite(Number(v))) throw new TandemError('BAD_CONFIG', `--${flag} must be a number, got '${v}'`);
    o[key] = Number(v);
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
    throw new TandemError('BAD_CONFIG', `--config ${file}: cannot read it: ${fsReason(err)}`, undefined, { cause: err });
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    const found = text.trim() === '' ? 'an empty file' : `invalid JSON (${(err as Error).message})`;
    throw new TandemError('BAD_CONFIG', `--config ${file}: expected a JSON object of train options (e.g. {"model": "mlp", "devices": 2}), found ${found}`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    const found = parsed === null ? 'null' : Array.isArray(parsed) ? 'an array' : `${typeof parsed} ${JSON.stringify(parsed)}`;
    throw new TandemError('BAD_CONFIG', `--config ${file}: expected a JSON object of train options (e.g. {"model": "mlp", "devices": 2}), found ${found}`);
  }
  return parsed as TrainConfig;
}
