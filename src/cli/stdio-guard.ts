/**
 * The command's output must not end a run: when the reader of stdout or
 * stderr goes away (`tandem train --json | head -3`: EPIPE; a closed
 * terminal: EIO), writing to that stream stops for the rest of the process
 * and training goes on. Without a listener, Node turns the stream's 'error'
 * into an uncaught exception.
 */
export function guardStdio(): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', () => {
      // The stream is destroyed after its first error: later writes are dropped, their errors come back here.
    });
  }
}
