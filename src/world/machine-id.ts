/**
 * Which machine this process runs on, for the hosts to tell which of them
 * share one (and so its cores: profiling/cpu-ceiling.ts): the kernel's boot id
 * (/proc/sys/kernel/random/boot_id — processes in different network
 * namespaces of one machine read the same), or the host name where it cannot
 * be read (not Linux).
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';

export function machineId(): string {
  try {
    const id = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    if (id) return `boot:${id}`;
  } catch {
    // not Linux, or /proc not mounted: the host name
  }
  return `host:${os.hostname()}`;
}
