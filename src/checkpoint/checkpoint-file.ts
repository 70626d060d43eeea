/**
 * Checkpoints: everything a run needs to continue exactly — step, parameters,
 * optimizer state, every device's local head (method B / partial-fc), every
 * rank's communication hook state (optional fields: older files still read) — packed
 * with msgpackr and written atomically (temporary file, flush, rename) with a
 * SHA-256 of the payload. Data-loader positions and sampling streams are pure
 * functions of (seed, step), so the step restores them.
 */
import { createHash, randomBytes } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { Packr } from 'msgpackr';
import { TandemError } from '../errors.js';
import { writeFileAtomically } from '../output/atomic-write.js';
import { fsReason } from '../output/fs-reason.js';
import { makeDirectory } from '../output/make-directory.js';
import { checkFields } from './checkpoint-fields.js';
import { readRegularFile } from '../read-regular-file.js';

const packr = new Packr({ structuredClone: true });
const MAGIC = 'tandem-checkpoint';
const VERSION = 1;
const NAME = /^checkpoint-(\d{9})\.tandem$/;
/** The largest checkpoint read (a model's weights are bounded by 4 GiB, layers-model-files.ts; with its state). */
export const MAX_CHECKPOINT_BYTES = 2 ** 34;
/** Between a checkpoint's name and the tag of its temporary file. */
export const TMP_INFIX = '.tmp-';

export type { Checkpoint, HeadState, HookCheckpoint } from './checkpoint-types.js';
import type { Checkpoint } from './checkpoint-types.js';

/**
 * A checkpoint file's bytes and where they were read (`source`: a file, or host 0's file sent over the network);
 * `skipped`: newer checkpoints of its directory that did not read back whole, each with its problem (see
 * newestWholeCheckpoint).
 */
export interface CheckpointBytes {
  source: string;
  bytes: Uint8Array;
  skipped?: string[];
}

export function checkpointPath(dir: string, step: number): string {
  return path.join(dir, `checkpoint-${String(step).padStart(9, '0')}.tandem`);
}

/**
 * Writes `checkpoint` into `dir` atomically; a crash mid-write leaves every earlier checkpoint intact. The temporary
 * file is `<checkpoint>.tmp-<tag>` (`tag`: `<pid>-<writer>-<n>`, unique per write: see checkpoint-store.ts); a failed
 * write removes it and fails with WRITE_FAILED naming the checkpoint and the reason.
 */
export async function writeCheckpoint(
  dir: string,
  checkpoint: Checkpoint,
  tag = `${process.pid}-${randomBytes(4).toString('hex')}-0`,
): Promise<string> {
  await makeDirectory(dir, `checkpoint directory ${dir}`);
  const file = checkpointPath(dir, checkpoint.step);
  return writeFileAtomically(file, encodeCheckpoint(checkpoint), {
    sync: true,
    temporary: `${file}${TMP_INFIX}${tag}`,
  });
}

/** A checkpoint file's bytes (decodeCheckpoint reads them back). */
export function encodeCheckpoint(checkpoint: Checkpoint): Buffer {
  const payload = packr.pack(checkpoint);
  const sha256 = createHash('sha256').update(payload).digest('hex');
  return packr.pack({ magic: MAGIC, version: VERSION, sha256, payload });
}

export async function readCheckpoint(file: string): Promise<Checkpoint> {
  return decodeCheckpoint(await readCheckpointBytes(file), file);
}

/**
 * A checkpoint file's bytes: a regular file of at most MAX_CHECKPOINT_BYTES (a name leading to a device or a FIFO is
 * refused, never read); BAD_CHECKPOINT naming the file otherwise.
 */
export async function readCheckpointBytes(file: string): Promise<Buffer> {
  try {
    return await readRegularFile(file, MAX_CHECKPOINT_BYTES);
  } catch (err) {
    throw new TandemError('BAD_CHECKPOINT', `checkpoint ${file} cannot be read: ${fsReason(err)}`, undefined, {
      cause: err,
    });
  }
}

/** A checkpoint file's bytes (`file` names where they came from in errors), checked as readCheckpoint does. */
export function decodeCheckpoint(bytes: Uint8Array, file: string): Checkpoint {
  if (bytes.length > MAX_CHECKPOINT_BYTES)
    throw new TandemError(
      'BAD_CHECKPOINT',
      `checkpoint ${file} has ${bytes.length} bytes, over ${MAX_CHECKPOINT_BYTES}`,
    );
  const checked = checkBytes(bytes);
  if ('problem' in checked) {
    throw new TandemError(
      'BAD_CHECKPOINT',
      `checkpoint ${file} is ${checked.problem}: ${checked.advice}; ${checked.fix ?? RESUME_EARLIER}`,
    );
  }
  let decoded: unknown;
  try {
    decoded = packr.unpack(checked.payload);
  } catch (err) {
    // A payload that passed its checksum but does not decode (nested past the stack, a bad length): crafted.
    throw new TandemError(
      'BAD_CHECKPOINT',
      `checkpoint ${file}: its payload does not decode (${(err as Error).message.slice(0, 120)}): it was crafted ` +
        `or altered; ${RESUME_EARLIER}`,
      undefined,
      { cause: err },
    );
  }
  return checkFields(decoded, file);
}

/**
 * Why a checkpoint's bytes do not read back whole, in a few words (`truncated (2100 of 4201 bytes)`), what likely made
 * it so, and the fix when not RESUME_EARLIER.
 */
interface Unreadable {
  problem: string;
  advice: string;
  fix?: string;
}

const RESUME_EARLIER = 'resume from an earlier checkpoint (--resume DIR takes the newest of DIR that reads back whole)';

/** A checkpoint's payload, once its frame and checksum are checked; else why not. */
function checkBytes(bytes: Uint8Array): { payload: Uint8Array } | Unreadable {
  if (bytes.length === 0) return { problem: 'empty (0 bytes)', advice: 'its write or copy did not finish' };
  let outer: { magic?: string; version?: number; sha256?: string; payload?: Uint8Array };
  try {
    outer = packr.unpack(bytes) as typeof outer;
  } catch (err) {
    const size = framedSize(bytes);
    if (size !== undefined && bytes.length < size)
      return { problem: `truncated (${bytes.length} of ${size} bytes)`, advice: 'its write or copy did not finish' };
    if (size !== undefined && bytes.length > size) {
      return {
        problem: `${bytes.length - size} bytes longer than its contents (${bytes.length} bytes, ${size} expected)`,
        advice: 'something was appended or copied over it',
      };
    }
    if ((err as { incomplete?: boolean }).incomplete) {
      // msgpackr: the bytes end before the value does
      return {
        problem: `truncated (${bytes.length} bytes, cut off before the header that records its size)`,
        advice: 'its write or copy did not finish',
      };
    }
    return {
      problem: 'not a tandem checkpoint (it does not decode as one)',
      advice: 'it was altered, or it is another file',
    };
  }
  if (!outer || outer.magic !== MAGIC || !outer.payload || typeof outer.sha256 !== 'string') {
    return {
      problem: 'not a tandem checkpoint (no tandem-checkpoint header)',
      advice: 'it was altered, or it is another file',
    };
  }
  if (outer.version !== VERSION)
    return {
      problem: `of format version ${outer.version}, and this tandem reads version ${VERSION}`,
      advice: 'another version of tandem wrote it',
      fix: 'resume with that version',
    };
  const sha256 = createHash('sha256').update(outer.payload).digest('hex');
  if (sha256 !== outer.sha256) {
    return { problem: 'corrupt: its checksum does not match its contents', advice: 'it was altered or partly written' };
  }
  return { payload: outer.payload };
}

/**
 * The size a checkpoint's frame declares (its last field, the payload, is counted by its header): the msgpack of
 * `{ magic, version, sha256, payload }` as msgpackr packs it (a record: a definition, an array of keys, then their
 * values). Undefined when `bytes` end before the payload's header, or are not such a frame.
 */
function framedSize(bytes: Uint8Array): number | undefined {
  const r = new FrameReader(bytes);
  try {
    // d4 72 <id>: msgpackr's record definition; then the keys (a fixarray of fixstr), then one value per key.
    if (r.uint(0, 1) !== 0xd4 || r.uint(1, 1) !== 0x72) return undefined;
    const keysAt = 3,
      count = r.uint(keysAt, 1) - 0x90;
    if (count < 1 || count > 15) return undefined;
    let at = keysAt + 1;
    const keys: string[] = [];
    for (let k = 0; k < count; k++) {
      const b = r.uint(at, 1);
      if (b < 0xa0 || b > 0xbf) return undefined;
      keys.push(r.stringAt(at + 1, b & 0x1f));
      at = r.skip(at);
    }
    if (keys[keys.length - 1] !== 'payload') return undefined;
    for (let k = 0; k < count; k++) at = r.skip(at);
    return at;
  } catch {
    return undefined;
  }
}

/**
 * msgpack headers whose value's length follows in 1, 2 or 4 bytes: [that size, the ext type's byte (1) or none (0)].
 */
const SIZED: Record<number, [1 | 2 | 4, number]> = {
  0xc4: [1, 0],
  0xc5: [2, 0],
  0xc6: [4, 0],
  0xc7: [1, 1],
  0xc8: [2, 1],
  0xc9: [4, 1],
  0xd9: [1, 0],
  0xda: [2, 0],
  0xdb: [4, 0],
};

/** msgpack headers of a fixed-size value: the value's whole size, header included. */
const FIXED: Record<number, number> = {
  0xca: 5,
  0xcb: 9,
  0xcc: 2,
  0xcd: 3,
  0xce: 5,
  0xcf: 9,
  0xd0: 2,
  0xd1: 3,
  0xd2: 5,
  0xd3: 9,
  0xd5: 4,
  0xd6: 6,
  0xd7: 10,
  0xd8: 18,
};

/** Reads msgpack headers of a frame's first bytes; a read past the end throws RangeError('short'). */
class FrameReader {
  private readonly view: DataView;

  constructor(private readonly bytes: Uint8Array) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  private need(at: number, n: number): void {
    if (at + n > this.bytes.length) throw new RangeError('short');
  }

  uint(at: number, n: 1 | 2 | 4): number {
    this.need(at, n);
    return n === 1 ? this.view.getUint8(at) : n === 2 ? this.view.getUint16(at) : this.view.getUint32(at);
  }

  stringAt(at: number, n: number): string {
    this.need(at, n);
    return Buffer.from(this.bytes.buffer, this.bytes.byteOffset + at, n).toString('utf8');
  }

  /** After the value at `at` (its contents are not read: a bin or an ext is skipped by its header alone). */
  skip(at: number): number {
    const b = this.uint(at, 1);
    if (b <= 0x7f || b >= 0xe0 || b === 0xc0 || b === 0xc2 || b === 0xc3) return at + 1;
    if (b >= 0xa0 && b <= 0xbf) return at + 1 + (b & 0x1f);
    if (SIZED[b]) {
      const [n, type] = SIZED[b];
      return at + 1 + n + type + this.uint(at + 1, n);
    }
    if (FIXED[b]) return at + FIXED[b];
    throw new RangeError('not a frame');
  }
}

/** A checkpoint file's bytes, read back whole (frame and checksum), else why not; `file` names it in a read error. */
async function readWhole(file: string): Promise<{ bytes: Uint8Array } | Unreadable> {
  let bytes: Uint8Array;
  try {
    bytes = await readRegularFile(file, MAX_CHECKPOINT_BYTES);
  } catch (err) {
    return { problem: `not readable: ${fsReason(err)}`, advice: "check the file's permissions and disk" };
  }
  const checked = checkBytes(bytes);
  return 'problem' in checked ? checked : { bytes };
}

/** The steps of the complete checkpoints in `dir`, newest first. */
export async function checkpointSteps(dir: string): Promise<number[]> {
  const names = await readdir(dir).catch(() => [] as string[]);
  return stepsOf(names);
}

function stepsOf(names: string[]): number[] {
  return names
    .map(n => NAME.exec(n))
    .filter((m): m is RegExpExecArray => m !== null)
    .map(m => Number(m[1]))
    .sort((a, b) => b - a);
}

async function namesIn(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch {
    throw new TandemError('BAD_CHECKPOINT', `--resume ${dir}: no such directory`);
  }
}

/** The latest complete checkpoint in `dir` (temporary files of an interrupted write are ignored). */
export async function latestCheckpoint(dir: string): Promise<string> {
  const steps = stepsOf(await namesIn(dir));
  if (steps.length === 0) throw new TandemError('BAD_CHECKPOINT', `--resume ${dir}: no checkpoint-*.tandem file in it`);
  return checkpointPath(dir, steps[0]);
}

/**
 * The newest checkpoint of `dir` that reads back whole (its frame and checksum; temporary files of an interrupted
 * write are ignored), and the newer ones skipped, each with its problem (`checkpoint-000000012.tandem: truncated (2100
 * of 4201 bytes)`): a machine that died mid-copy, a partial rsync, a disk error cost one checkpoint, not the run.
 * BAD_CHECKPOINT when `dir` holds no checkpoint, or none reads back whole (naming each and its problem).
 */
export async function newestWholeCheckpoint(dir: string): Promise<CheckpointBytes> {
  const steps = stepsOf(await namesIn(dir));
  if (steps.length === 0) throw new TandemError('BAD_CHECKPOINT', `--resume ${dir}: no checkpoint-*.tandem file in it`);
  const skipped: string[] = [];
  for (const step of steps) {
    const file = checkpointPath(dir, step);
    const read = await readWhole(file);
    if ('bytes' in read) return { source: file, bytes: read.bytes, skipped };
    skipped.push(`${path.basename(file)}: ${read.problem}, ${read.advice}`);
  }
  throw new TandemError(
    'BAD_CHECKPOINT',
    `--resume ${dir}: none of its ${steps.length} checkpoint(s) reads back whole — ${skipped.join('; ')}. ` +
      'Resume from a copy of the directory that is whole, or start the run again without --resume',
  );
}
