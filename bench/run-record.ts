/**
 * What a bench's JSON records of where it ran, in the fields docs/tools/benchmarks.mjs reads: the CPU (model name and
 * its bf16 flags), cores, the 1-minute load average at the end, Node's version and the commit.
 */
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import { BF16_FLAGS, parseCpuinfo } from '../src/engine/native/bf16-support.js';
import { readFileSync } from 'node:fs';

export function runRecord(): { machine: string; cores: number; loadAverage: number; node: string; commit?: string } {
  let cpu = os.cpus()[0]?.model ?? 'unknown CPU',
    flags: string[] = [];
  try {
    const info = parseCpuinfo(readFileSync('/proc/cpuinfo', 'utf8'));
    cpu = info.cpu || cpu;
    flags = BF16_FLAGS.filter(f => info.flags.includes(f));
  } catch {
    // not Linux: the model name alone
  }
  const git = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' });
  return {
    machine: `${cpu} (${flags.length > 0 ? flags.join(', ') : 'no bf16 instructions'})`,
    cores: os.availableParallelism(),
    loadAverage: Number(os.loadavg()[0].toFixed(2)),
    node: process.version,
    ...(git.status === 0 ? { commit: git.stdout.trim() } : {}),
  };
}
