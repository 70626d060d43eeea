/**
 * One TensorBoard event file (`DIR/events.out.tfevents.<seconds>.<hostname>`; when another writer of the same second
 * has that name, `….<pid>.<n>` after it, as TensorFlow's writers add a suffix), written as TensorFlow's
 * EventFileWriter does: the file-version event first, then one event per (step, scalars). Values are framed into a
 * buffer as they come and appended to the file off the caller's path: every `flushMs`, on `flush()`, and on
 * `close()`. A failed write (a full disk, a directory that cannot be made) is reported once through `warn`, and the
 * writer drops what it holds from then on: the run goes on without its event file.
 */
import { mkdir, open, type FileHandle } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { eventRecord, FILE_VERSION, type ScalarValue } from './tfevents.js';

export interface EventFileWriterOptions {
  /** Append what is buffered this often (ms); default 2000. */
  flushMs?: number;
  /** A write failed: said once, the writer then stops. */
  warn?: (message: string) => void;
}

/** Names tried after the plain one is taken, before the writer gives up. */
const MAX_SUFFIXES = 100;

export class EventFileWriter {
  /** The event file's name: the plain one until a write finds it taken. */
  private name: string;
  private pending: Buffer[] = [];
  private writing: Promise<void> = Promise.resolve();
  /** The event file, created by the first append (exclusively: never a file or a link already there). */
  private handle?: FileHandle;
  private failed = false;
  private closed = false;
  private readonly timer: NodeJS.Timeout;
  private readonly warn: (message: string) => void;

  constructor(
    readonly dir: string,
    options: EventFileWriterOptions = {},
  ) {
    this.name = path.join(dir, `events.out.tfevents.${Math.floor(Date.now() / 1000)}.${os.hostname()}`);
    this.warn = options.warn ?? (() => {});
    this.pending.push(eventRecord(0, { fileVersion: FILE_VERSION }));
    this.timer = setInterval(() => void this.flush(), options.flushMs ?? 2000);
    this.timer.unref();
    void this.flush(); // the file and its first event now: a directory that cannot be written is said at once
  }

  /** The event file (once the first write made it, its final name). */
  get file(): string {
    return this.name;
  }

  /** Scalars of one step, one event. Non-finite values are kept (TensorBoard shows NaN/Inf). */
  scalars(step: number, values: ScalarValue[]): void {
    if (this.failed || this.closed || values.length === 0) return;
    this.pending.push(eventRecord(step, values));
  }

  /**
   * A run that resumes at `step`: TensorBoard (`SessionLog.START`, as PyTorch's `SummaryWriter(purge_step=…)` writes)
   * then drops the points of this step and later that an earlier file of the run holds (written after the checkpoint
   * the run resumes from), so no step is shown twice and no curve goes back.
   */
  sessionStart(step: number): void {
    if (this.failed || this.closed) return;
    this.pending.push(eventRecord(step, { sessionStart: true }));
  }

  /** Appends what is buffered; resolves when it is written (or the write failed and was warned about). */
  flush(): Promise<void> {
    if (this.pending.length === 0 || this.failed) return this.writing;
    const data = Buffer.concat(this.pending);
    this.pending = [];
    this.writing = this.writing.then(() => this.append(data));
    return this.writing;
  }

  /** Flushes and stops the timer; later scalars are dropped. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
    this.closed = true;
    await this.handle?.close().catch(() => {});
    this.handle = undefined;
  }

  /**
   * Appends `data` to the event file. The file is created exclusively (O_EXCL) and kept open: a name already taken —
   * another writer's file of the same second (two `model.fit` calls with `tensorBoard(dir)` in a row), or a symbolic
   * link planted in a shared directory to make the run append to a file of someone else's — is never opened: the
   * writer takes the next name (`….<pid>.<n>`), and no later append follows a name again.
   */
  private async append(data: Buffer): Promise<void> {
    if (this.failed) return;
    try {
      if (!this.handle) {
        await mkdir(this.dir, { recursive: true });
        this.handle = await this.create();
      }
      await this.handle.appendFile(data);
    } catch (err) {
      this.failed = true;
      this.pending = [];
      await this.handle?.close().catch(() => {});
      this.handle = undefined;
      const why = err instanceof Error ? err.message : String(err);
      this.warn(
        `tensorboard: cannot write ${this.file} (${why}); the run goes on without its event file ` +
          `(${writeFix((err as NodeJS.ErrnoException).code)})`,
      );
    }
  }

  /** The event file, created: the plain name, else the first `….<pid>.<n>` not taken. */
  private async create(): Promise<FileHandle> {
    const plain = this.name;
    for (let n = 0; ; n++) {
      try {
        return await open(this.name, 'ax');
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || n === MAX_SUFFIXES) throw err;
        this.name = `${plain}.${process.pid}.${n + 1}`;
      }
    }
  }
}

/** What to do about a write that failed with `code`. */
function writeFix(code: string | undefined): string {
  if (code === 'ENOSPC' || code === 'EDQUOT') return 'free space on its disk, or give a directory on another';
  if (code === 'ENOTDIR' || code === 'EEXIST')
    return 'a file stands where a directory of the path should be: give a directory path';
  return 'give --tensorboard DIR (or tensorBoard(dir)) a directory this user can create and write';
}
