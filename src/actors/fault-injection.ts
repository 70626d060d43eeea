/**
 * The test hook behind `faultInjection`: make this thread fail the way a real
 * device can — throw, exit, or stop responding — or (`perturb`, a test fault)
 * make one replica's parameters silently differ from the others'. One place
 * for every thread that honours it (compute, comm, data loader).
 */
export type InjectedFault = 'throw' | 'exit' | 'hang';

export function injectFault(kind: InjectedFault, phase: string): never {
  if (kind === 'exit') process.exit(3);
  if (kind === 'hang')
    for (;;) {
      /* a device that stops responding */
    }
  throw new Error(`injected fault (throw) in ${phase}`);
}

/**
 * The `perturb` test fault: `params[at]` moved by 0.01 (a replica that no longer equals the others). Not one bit:
 * a bias that starts at 0 would become a denormal that the next update rounds away.
 */
export function perturbParameter(params: Float32Array, at: number): void {
  params[at] += 0.01;
}
