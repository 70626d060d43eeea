/**
 * How a process `tandem launch` started ended (launch.ts): in words when it failed, and how the launcher stops the
 * others when one failed for good.
 */
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';

/** How long a stopped host may take to end by itself (its step, its checkpoint) before it is killed. */
export const STOP_GRACE_MS = 10_000;
/** How one process ended. */
export type HostEnd =
  { kind: 'exited'; member: number; code: number } | { kind: 'killed'; member: number; signal: NodeJS.Signals };

/** Resolves when the host has exited and its output is read to the end. */
export async function hostEnd(child: ChildProcess, member: number): Promise<HostEnd> {
  const [code, signal] = (await once(child, 'close')) as [number | null, NodeJS.Signals | null];
  return signal ? { kind: 'killed', member, signal } : { kind: 'exited', member, code: code ?? 1 };
}

/**
 * What went wrong with a host (`pid`), in words; undefined when it ended well. A SIGKILL the launcher did not send
 * (`byUs`: its own, past the stop grace) is most often the kernel's out-of-memory killer: the words say so, where to
 * look, and what uses less memory (a process killed outright says nothing itself).
 */
export function failed(end: HostEnd, pid?: number, byUs = false): string | undefined {
  switch (end.kind) {
    case 'exited':
      return end.code === 0 ? undefined : `exited with code ${end.code}`;
    case 'killed':
      if (end.signal !== 'SIGKILL') return `was killed by ${end.signal}`;
      if (byUs)
        return `was killed by SIGKILL (by tandem launch: it had not stopped ${STOP_GRACE_MS / 1000} s after SIGTERM)`;
      return (
        "was killed by SIGKILL (not by tandem: the kernel's out-of-memory killer, or a user; check `dmesg` (or " +
        '`journalctl -k`) ' +
        (`for "Out of memory: Killed process${pid !== undefined ? ` ${pid}` : ''}"; a smaller --batch or fewer ` +
          `--devices per process uses less memory)`)
      );
    default: {
      const never: never = end;
      throw new Error(`unknown host end ${JSON.stringify(never)}`);
    }
  }
}

/**
 * SIGTERM to every host still running (each ends its step, as on a stop); SIGKILL to any still there after
 * STOP_GRACE_MS (added to `killed`).
 */
export function stopOthers(children: ChildProcess[], killed: Set<ChildProcess>): void {
  const running = children.filter(c => c.exitCode === null && c.signalCode === null);
  running.forEach(c => c.kill('SIGTERM'));
  const timer = setTimeout(
    () =>
      running.forEach(c => {
        if (c.exitCode !== null || c.signalCode !== null) return;
        killed.add(c);
        c.kill('SIGKILL');
      }),
    STOP_GRACE_MS,
  );
  timer.unref();
}
