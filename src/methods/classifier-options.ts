/** The options of the classifier methods (local-head, partial-fc), checked and resolved before any thread starts. */
import { TandemError } from '../errors.js';
import type { ClassifierConfig, TrainConfig } from '../config-types.js';
import { HEAD_KINDS, type HeadKind } from '../classifier/classifier-head.js';
import { LabelPartition } from '../classifier/label-partition.js';
import type { MethodResolveContext } from './training-method.js';
import { CLASSIFIER_OPTIONS, type ClassifierOptions } from './method-options.js';

/** Options only the classifier methods take. */
export const CLASSIFIER_OPTION_KEYS = Object.keys(CLASSIFIER_OPTIONS) as (keyof ClassifierOptions)[];

function bad(field: string, message: string): never {
  throw new TandemError('BAD_CONFIG', `config.${field}: ${message}`);
}

function inRange(field: string, v: unknown, min: number, max: number, integer = false): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max || (integer && !Number.isInteger(v))) {
    bad(
      field,
      integer
        ? `must be an integer in [${min}, ${max}], got ${JSON.stringify(v)}`
        : `must be a number in [${min}, ${max}], got ${JSON.stringify(v)}`,
    );
  }
  return v;
}

export function resolveClassifierOptions(
  config: TrainConfig,
  ctx: MethodResolveContext,
  method: string,
): ClassifierConfig {
  const { classes, devices } = ctx;
  if (method === 'local-head' && config.partition === undefined && classes < devices) {
    bad(
      'classes',
      `method local-head: ${classes} classes cannot be shared among ${devices} devices, and every device needs at ` +
        `least 2 labels ` +
        (`(a softmax over one label trains nothing). Give at least ${2 * devices} classes, ` +
          `${classes >= 2 ? `at most ${Math.floor(classes / 2)} device(s), ` : ''}`) +
        'or --method partial-fc with at most as many devices as classes',
    );
  }
  const partition =
    config.partition !== undefined
      ? LabelPartition.fromShares(classes, config.partition)
      : LabelPartition.contiguous(classes, devices);
  if (partition.devices !== devices) bad('partition', `lists ${partition.devices} devices but the run has ${devices}`);
  if (method === 'local-head') refuseLoneLabels(partition, config.partition !== undefined);
  const head = config.head ?? 'linear';
  if (!HEAD_KINDS.includes(head)) bad('head', `must be one of ${HEAD_KINDS.join(', ')}, got ${JSON.stringify(head)}`);
  const exportDevice = config.exportDevice ?? 0;
  if (!Number.isInteger(exportDevice) || exportDevice < 0 || exportDevice >= devices)
    bad('exportDevice', `must be a device in [0, ${devices})`);
  const resolved: ClassifierConfig = {
    embedding: inRange('embedding', config.embedding ?? 128, 1, 65536, true),
    head: head as HeadKind,
    scale: inRange('scale', config.scale ?? (head === 'cosine' ? 30 : 1), 1e-6, 1e6),
    margin: inRange('margin', config.margin ?? 0, 0, Math.PI / 2),
    sampleRate: inRange('sampleRate', config.sampleRate ?? 1, 1e-6, 1),
    partition: partition.labels.map(l => Array.from(l)),
    exportDevice,
    exportClassifier: config.exportClassifier ?? false,
  };
  if (config.sampleRate !== undefined && method !== 'partial-fc')
    bad('sampleRate', 'applies to --method partial-fc only');
  if (method === 'partial-fc' && head !== 'linear')
    bad('head', 'partial-fc supports --head linear only; use --method local-head for a cosine head');
  for (const k of ['scale', 'margin'] as const) {
    if (config[k] !== undefined && head !== 'cosine')
      bad(
        k,
        `applies to --head cosine only (a linear head has no ${k}); give --head ` +
          `cosine${method === 'partial-fc' ? ' with --method local-head' : ''}, or leave out --${k}`,
      );
  }
  return resolved;
}

/**
 * local-head's loss is a softmax over the device's own labels: over one label it is constant (probability 1, loss 0,
 * no gradient), so that device's head and its samples would train nothing. Refused, naming the device and the fixes.
 */
function refuseLoneLabels(partition: LabelPartition, given: boolean): void {
  const lone = partition.labels.findIndex(ls => ls.length === 1);
  if (lone === -1) return;
  const { classes, devices } = partition;
  bad(
    given ? 'partition' : 'classes',
    `method local-head: device ${lone} owns a single label (${partition.labels[lone][0]}) of ${classes} classes ` +
      `over ${devices} devices; ` +
      ('its softmax over one label is constant (loss 0, no gradient), so its head and its samples would train ' +
        'nothing. ') +
      (`Give every device at least 2 labels: ${given ? 'a partition with 2 or more labels per device, ' : ''}at ` +
        `least ${2 * devices} classes, `) +
      (`${classes >= 2 ? `at most ${Math.floor(classes / 2)} device(s), ` : ''}or --method partial-fc (one softmax ` +
        `over every class)`),
  );
}
