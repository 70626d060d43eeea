/**
 * What SIGINT, SIGTERM and SIGHUP do to `tandem train`: the first one stops
 * the run (finish the step in flight, checkpoint, end; a step that does not
 * get there within the grace period is aborted); the second aborts it at once
 * (every thread ends, the last completed step is checkpointed); a third exits
 * the process on the spot. The exit code is 128 + the first signal's number.
 */
import { constants } from 'node:os';

export const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
export type StopSignal = (typeof STOP_SIGNALS)[number];

export interface StopSignals {
  /** The first signal received, if any. */
  readonly received: StopSignal | undefined;
  /** 128 + the first signal's number (130, 143, 129). */
  readonly exitCode: number;
  /** Stops listening. */
  dispose(): void;
}

export function stopOnSignals(run: { stop(): void; abort(): void }, say: (line: string) => void): StopSignals {
  const seen: StopSignal[] = [];
  const exitCode = () => (seen[0] ? 128 + constants.signals[seen[0]] : 0);
  const onSignal = (sig: StopSignal) => {
    seen.push(sig);
    switch (seen.length) {
      case 1:
        say(`tandem: ${sig}: finishing the current step, then checkpointing and stopping (again to abort the step)…`);
        run.stop();
        return;
      case 2:
        say(`tandem: ${sig} again: aborting the step in flight, checkpointing the last completed step…`);
        run.abort();
        return;
      default:
        say(`tandem: ${sig} a third time: exiting now`);
        process.exit(exitCode());
    }
  };
  for (const sig of STOP_SIGNALS) process.on(sig, onSignal);
  return {
    get received() {
      return seen[0];
    },
    get exitCode() {
      return exitCode();
    },
    dispose: () => {
      for (const sig of STOP_SIGNALS) process.off(sig, onSignal);
    },
  };
}
