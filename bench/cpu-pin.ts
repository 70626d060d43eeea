/**
 * Pins this process's threads to given CPUs (`taskset -a -p`), so that the threads and child processes it starts
 * next run there too: `npm run bench -- precision --pin` runs each tandem/PyTorch pair on one core. Unpinned, a
 * 1-device tandem run has its comm thread (the update, the parameters' bf16 copy) on the other core beside its
 * compute thread, where PyTorch's one thread does its update itself. This VM's two vCPUs also differed in speed at
 * times (alexnet-mini's bf16 forward and backward 9.6–10.0 ms on CPU 0 against 7.9–8.1 on CPU 1, three runs each,
 * 2026-12-05 18:20 UTC; in the next bench run PyTorch was faster on CPU 0): a pinned pair shares one.
 */
import { execFileSync } from 'node:child_process';

/** The CPUs this process may run on now (`taskset -c -p`), or undefined where taskset is missing. */
export function allowedCpus(): number[] | undefined {
  try {
    const text = execFileSync('taskset', ['-c', '-p', String(process.pid)], { encoding: 'utf8' });
    return text
      .slice(text.lastIndexOf(':') + 1)
      .trim()
      .split(',')
      .flatMap(part => {
        const [from, to = from] = part.split('-').map(Number);
        return Array.from({ length: to - from + 1 }, (_, i) => from + i);
      });
  } catch {
    return undefined;
  }
}

/** Every thread of this process, and what it starts next, on `cpus`. */
export function pinTo(cpus: readonly number[]): void {
  execFileSync('taskset', ['-a', '-c', '-p', cpus.join(','), String(process.pid)], { stdio: 'ignore' });
}
