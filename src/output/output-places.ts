/**
 * Every place a run will write, listed from its configuration and prepared
 * before any thread starts: directories created, each checked to be a
 * directory (files: not a directory, not a device) and probed by a real
 * atomic write, so a bad `--out`, `--trace` or `--checkpoint-dir` fails in
 * milliseconds with the path and the reason instead of after training.
 */
import { rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { ResolvedConfig } from '../config-types.js';
import { TandemError } from '../errors.js';
import { makeDirectory } from './make-directory.js';
import { writeFileAtomically } from './atomic-write.js';
import { fsReason } from './fs-reason.js';

/** The files `--out DIR` receives (src/trainer/run-summary.ts and model-files.ts write them). */
export const OUT_FILES = {
  model: 'model.json',
  weights: 'weights.bin',
  summary: 'summary.json',
  timeline: 'timeline.svg',
  trace: 'trace.json',
  /** The dashboard's messages, one per line (monitor/event-log.ts): `tandem dashboard DIR` reads them. */
  events: 'events.jsonl',
  classifierDir: 'classifier',
  labels: 'labels.json',
  /** --keep-best K: the best epochs' models, `best/epoch-<E>` (trainer/best-epochs.ts). */
  bestDir: 'best',
} as const;

/**
 * A place a run writes: `label` names it as the user gave it (`--out out/run`); `lock`: the run locks that directory.
 */
export type OutputPlace =
  { kind: 'directory'; path: string; label: string; lock: boolean } | { kind: 'file'; path: string; label: string };

/** Every place a run of `cfg` writes, directories before the files in them. */
export function outputPlacesOf(
  cfg: Pick<ResolvedConfig, 'out' | 'trace' | 'checkpointDir' | 'classifier' | 'classNames' | 'epochLogs'>,
): OutputPlace[] {
  const places: OutputPlace[] = [];
  const directory = (p: string, label: string, lock: boolean) =>
    places.push({ kind: 'directory', path: path.resolve(p), label, lock });
  const file = (p: string, label: string) => places.push({ kind: 'file', path: path.resolve(p), label });
  if (cfg.out !== undefined) {
    const label = `--out ${cfg.out}`;
    directory(cfg.out, label, true);
    for (const name of [OUT_FILES.model, OUT_FILES.weights, OUT_FILES.summary, OUT_FILES.timeline, OUT_FILES.events])
      file(path.join(cfg.out, name), label);
    if (cfg.trace === undefined) file(path.join(cfg.out, OUT_FILES.trace), label);
    if (cfg.classNames) file(path.join(cfg.out, OUT_FILES.labels), label);
    if (cfg.epochLogs?.keepBest) directory(path.join(cfg.out, OUT_FILES.bestDir), label, false);
    if (cfg.classifier?.exportClassifier) {
      const dir = path.join(cfg.out, OUT_FILES.classifierDir);
      directory(dir, label, false);
      for (const name of [OUT_FILES.model, OUT_FILES.weights]) file(path.join(dir, name), label);
    }
  }
  if (cfg.trace !== undefined) file(cfg.trace, `--trace ${cfg.trace}`);
  if (cfg.checkpointDir !== undefined) directory(cfg.checkpointDir, `--checkpoint-dir ${cfg.checkpointDir}`, true);
  return places;
}

/** The directories among `places` a run lock covers: where checkpoints and results go. */
export function lockedDirectories(places: readonly OutputPlace[]): OutputPlace[] {
  const seen = new Set<string>();
  return places.filter(p => p.kind === 'directory' && p.lock && !seen.has(p.path) && seen.add(p.path));
}

/** Creates and probes every place; the first that cannot be written fails with BAD_OUTPUT naming it and the reason. */
export async function prepareOutputPlaces(places: readonly OutputPlace[]): Promise<void> {
  const probed = new Set<string>();
  for (const place of places) {
    switch (place.kind) {
      case 'directory':
        await makeDirectory(place.path, place.label);
        await probeDirectory(place.path, place.label, probed);
        break;
      case 'file':
        await checkFilePlace(place);
        await makeDirectory(path.dirname(place.path), place.label);
        await probeDirectory(path.dirname(place.path), place.label, probed);
        break;
      default: {
        const never: never = place;
        throw new Error(`unknown output place ${JSON.stringify(never)}`);
      }
    }
  }
}

/**
 * A file place must not be a directory (an atomic write cannot replace one) nor a device, pipe or socket (it would
 * replace the node).
 */
async function checkFilePlace(place: OutputPlace): Promise<void> {
  const found = await stat(place.path).catch(() => undefined);
  if (found?.isDirectory()) {
    throw new TandemError(
      'BAD_OUTPUT',
      `${place.label}: ${place.path} is a directory, and a file is needed there` +
        (place.label.startsWith('--trace')
          ? ` (give a file name, e.g. ${path.join(place.path, OUT_FILES.trace)})`
          : ''),
    );
  }
  if (found && !found.isFile())
    throw new TandemError(
      'BAD_OUTPUT',
      `${place.label}: ${place.path} is not a regular file (a device, pipe or socket); give a file path`,
    );
}

/** One atomic write and removal of a probe file in `dir`: what every result write will do there. */
async function probeDirectory(dir: string, label: string, probed: Set<string>): Promise<void> {
  if (probed.has(dir)) return;
  probed.add(dir);
  const probe = path.join(dir, `.tandem-probe-${process.pid}`);
  try {
    await writeFileAtomically(probe, 'tandem checks that it can write here\n');
  } catch (err) {
    const reason = fsReason(err instanceof Error && err.cause !== undefined ? err.cause : err);
    throw new TandemError('BAD_OUTPUT', `${label}: cannot write in ${dir}: ${reason}`, undefined, { cause: err });
  }
  await rm(probe, { force: true });
}
