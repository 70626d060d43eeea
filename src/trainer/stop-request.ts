/**
 * How a run is asked, from outside, to end early (the handle's `stop()` and
 * `abort()`, the CLI's signals):
 * - `stop`: finish the step in flight, checkpoint, end cleanly;
 * - `abort`: end now — the step in flight is abandoned, a checkpoint of the
 *   last step every device completed is written, `done` rejects with ABORTED.
 * A stop becomes an abort when the run has not reached its stop checkpoint
 * within `stopGraceMs` (the run arms that timer). Asking twice is harmless.
 */
export type StopKind = 'stop' | 'abort';

export class StopRequest {
  private kind?: StopKind;
  private readonly listeners = new Set<(kind: StopKind) => void>();

  /** What was asked so far: undefined, 'stop' or 'abort'. */
  get requested(): StopKind | undefined {
    return this.kind;
  }

  stop(): void {
    this.request('stop');
  }
  abort(): void {
    this.request('abort');
  }

  /** Calls `listener` for each new request (at once for the one already made); returns the way to stop listening. */
  listen(listener: (kind: StopKind) => void): () => void {
    this.listeners.add(listener);
    if (this.kind) listener(this.kind);
    return () => {
      this.listeners.delete(listener);
    };
  }

  private request(kind: StopKind): void {
    if (this.kind === 'abort' || this.kind === kind) return;
    this.kind = kind;
    for (const l of [...this.listeners]) l(kind);
  }
}
