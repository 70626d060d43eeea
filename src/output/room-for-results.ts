/**
 * Once the model is built (its parameter count known) and before step 1: is
 * there room for what the run must write? The trained model in `--out` and
 * one checkpoint in the checkpoint directory, at least; a disk without that
 * much free space is refused now, instead of losing the trained model to
 * ENOSPC at the end. (A lower bound: model.json, the trace, the picture and
 * the classifier heads come on top; a write that still fails is WRITE_FAILED.)
 */
import { stat, statfs } from 'node:fs/promises';
import path from 'node:path';
import type { ResolvedConfig } from '../config-types.js';
import { TandemError } from '../errors.js';
import { optimizerStateSlots } from '../optim/flat-optimizer.js';

/** Bytes the run needs in a directory, named for the message. */
export interface RoomNeed {
  dir: string;
  label: string;
  bytes: number;
  what: string;
}

/**
 * What a run of `cfg` with this many parameters and non-trainable floats writes at the least: the model, and one
 * checkpoint if it checkpoints.
 */
export function resultNeeds(
  cfg: Pick<ResolvedConfig, 'out' | 'checkpointDir' | 'checkpointEvery' | 'optimizer'>,
  parameters: number,
  stateFloats: number,
): RoomNeed[] {
  const needs: RoomNeed[] = [];
  if (cfg.out !== undefined)
    needs.push({
      dir: path.resolve(cfg.out),
      label: `--out ${cfg.out}`,
      bytes: 4 * (parameters + stateFloats),
      what: 'the trained model',
    });
  const checkpointDir = cfg.checkpointDir ?? cfg.out;
  if (cfg.checkpointEvery !== undefined && checkpointDir !== undefined) {
    needs.push({
      dir: path.resolve(checkpointDir),
      label: `${cfg.checkpointDir ? '--checkpoint-dir' : '--out'} ${checkpointDir}`,
      bytes: 4 * (parameters * (1 + optimizerStateSlots(cfg.optimizer)) + stateFloats),
      what: 'a checkpoint',
    });
  }
  return needs;
}

export async function checkRoomForResults(needs: readonly RoomNeed[]): Promise<void> {
  const byDevice = new Map<number, { free: number; needs: RoomNeed[] }>();
  for (const need of needs) {
    const device = (await stat(need.dir)).dev;
    let entry = byDevice.get(device);
    if (!entry) {
      const fs = await statfs(need.dir);
      // root may use the reserved blocks
      entry = { free: (process.getuid?.() === 0 ? fs.bfree : fs.bavail) * fs.bsize, needs: [] };
      byDevice.set(device, entry);
    }
    entry.needs.push(need);
  }
  for (const { free, needs: onDevice } of byDevice.values()) {
    const total = onDevice.reduce((n, x) => n + x.bytes, 0);
    if (total > free) {
      throw new TandemError(
        'BAD_OUTPUT',
        `${[...new Set(onDevice.map(n => n.label))].join(' and ')}: no room for the results: ` +
          `${onDevice.map(n => `${n.what} needs ${kib(n.bytes)}`).join(', ')}, ` +
          `and the file system of ${onDevice[0].dir} has ${kib(free)} free; free some space or give another directory`,
      );
    }
  }
}

function kib(bytes: number): string {
  return bytes >= 2 ** 20 ? `${(bytes / 2 ** 20).toFixed(1)} MiB` : `${Math.ceil(bytes / 1024)} KiB`;
}
