/**
 * The test hook behind `faultInjection`: make this thread fail the way a real
 * device can — throw, exit, or stop responding. One place for every thread
 * that honours it (compute, comm, data loader).
 */
export type InjectedFault = 'throw' | 'exit' | 'hang';

export function injectFault(kind: InjectedFault, phase: string): never {
  if (kind === 'exit') process.exit(3);
  if (kind === 'hang') for (;;) { /* a device that stops responding */ }
  throw new Error(`injected fault (throw) in ${phase}`);
}
