/**
 * Whether this machine multiplies in bf16 natively: the CPU's flags (`amx_bf16`, `avx512_bf16` in /proc/cpuinfo) and
 * the kernel oneDNN actually picks for a bf16 matmul (its implementation string). Checked on the main thread before
 * any device thread starts; `TANDEM_CPUINFO` names another cpuinfo file (tests mask the flags with it).
 */
import { readFileSync } from 'node:fs';
import type { NativeAddon } from './native-addon.js';

/** The instructions oneDNN's bf16 kernels need, fastest first. */
export const BF16_FLAGS = ['amx_bf16', 'avx512_bf16'] as const;

export interface Bf16Support {
  /** The CPU's model name, as /proc/cpuinfo gives it ('' when unknown). */
  cpu: string;
  /** Which of BF16_FLAGS the CPU has. */
  flags: string[];
  /** oneDNN's effective ISA and its implementation for a small bf16 matmul ('' when it has none). */
  isa: string;
  implementation: string;
  /** Undefined when bf16 runs here; else why not, naming what is missing. */
  refusal?: string;
}

/** The CPU's model name and flags from a cpuinfo text (first processor). */
export function parseCpuinfo(text: string): { cpu: string; flags: string[] } {
  const field = (name: string) => new RegExp(`^${name}\\s*:\\s*(.*)$`, 'm').exec(text)?.[1]?.trim() ?? '';
  return { cpu: field('model name'), flags: field('flags').split(/\s+/).filter(Boolean) };
}

function readCpuinfo(): { cpu: string; flags: string[]; source: string } {
  const source = process.env.TANDEM_CPUINFO || '/proc/cpuinfo';
  try {
    return { ...parseCpuinfo(readFileSync(source, 'utf8')), source };
  } catch {
    return { cpu: '', flags: [], source };
  }
}

/** What bf16 needs, what this machine has, and a refusal naming what is missing when it cannot run. */
export function bf16Support(addon: Pick<NativeAddon, 'bf16Support'>): Bf16Support {
  const info = readCpuinfo();
  const flags = BF16_FLAGS.filter(f => info.flags.includes(f));
  const onednn = addon.bf16Support();
  const base = { cpu: info.cpu, flags, isa: onednn.isa, implementation: onednn.implementation };
  const cpu = info.cpu ? ` (${info.cpu})` : '';
  if (flags.length === 0) {
    return {
      ...base,
      refusal:
        `precision bf16 needs a CPU with AMX-BF16 (amx_bf16) or AVX512-BF16 (avx512_bf16); this CPU${cpu} has ` +
        `neither (flags read from ${info.source}). oneDNN would emulate bf16 more slowly than float32 multiplies: ` +
        'use --precision fp32 here',
    };
  }
  if (!/bf16|amx/.test(onednn.implementation)) {
    const why = onednn.implementation ? `picked '${onednn.implementation}'` : `has none (${onednn.reason ?? '?'})`;
    return {
      ...base,
      refusal:
        `precision bf16: the CPU${cpu} has ${flags.join(', ')} but oneDNN ${onednn.isa} ${why} for a bf16 matmul, ` +
        'not a bf16 kernel; use --precision fp32 (or a newer oneDNN)',
    };
  }
  return base;
}
