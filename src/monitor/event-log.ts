/**
 * A run's event log, `--out DIR/events.jsonl`: the dashboard's messages (dashboard-feed.ts) one JSON object per line,
 * so that `tandem dashboard DIR` shows a finished run as its live page did. Lines are buffered and appended every
 * second and at the end, never on the step's path; each append first checks that the path still leads to the
 * directory the run locked (locked-places.ts). Nothing is written before the run has started (a run refused at the
 * door leaves no log). A failed write is one warning and the log stops; the run goes on.
 */
import { appendFile, writeFile } from 'node:fs/promises';
import { checkStillLocked } from '../output/locked-places.js';
import type { DashboardMessage } from './dashboard-feed.js';

const FLUSH_MS = 1000;

export class EventLog {
  private lines: string[] = [];
  private writing: Promise<void> = Promise.resolve();
  private readonly timer: NodeJS.Timeout;
  private failed = false;
  private started = false;

  /** `append`: keep the lines there (a resumed run goes on with its log); else the first write replaces them. */
  constructor(
    readonly file: string,
    private append: boolean,
    private readonly warn: (message: string) => void,
  ) {
    this.timer = setInterval(() => void this.flush(), FLUSH_MS);
    this.timer.unref();
  }

  /** What the log keeps: every message but the timeline (the finished run's comes from its trace) and the end. */
  add(message: DashboardMessage): void {
    if (this.failed || message.kind === 'timeline' || message.kind === 'end') return;
    if (message.kind === 'event' && message.event.type === 'started') this.started = true;
    this.lines.push(JSON.stringify(message));
  }

  flush(): Promise<void> {
    if (this.lines.length === 0 || this.failed || !this.started) return this.writing;
    const text = this.lines.join('\n') + '\n';
    this.lines = [];
    const write = this.append ? appendFile : writeFile;
    this.append = true;
    this.writing = this.writing.then(() =>
      this.guarded(async () => {
        await checkStillLocked(this.file);
        await write(this.file, text);
      }),
    );
    return this.writing;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }

  private async guarded(write: () => Promise<void>): Promise<void> {
    if (this.failed) return;
    try {
      await write();
    } catch (err) {
      this.failed = true;
      this.lines = [];
      this.warn(
        `the event log ${this.file} could not be written (${(err as Error).message}); the run goes on without it`,
      );
    }
  }
}
