/**
 * The node half of the GPU check (tools/gpu-check.sh, run from the bundle `npm run gpu-bundle` writes;
 * docs/guide/gpu.md). One subcommand a process, each writing one JSON file:
 *
 *   adapters [--accept-software] --out FILE   the adapters Dawn offers (default, high-performance, low-power, fallback)
 *                                             name, vendor, driver; exit 2 with none, 3 with only software ones
 *   correctness [--quick] --out FILE          gpu-check-runs.ts: 1 and 2 webgpu devices = the cpu engine within 1e-4
 *   devices [--quick] --out FILE              gpu-check-runs.ts: samples/s and the step's split on 1 and 2 devices
 *   summary --dir DIR --seconds S --budget B  one screen from DIR's files; exit 1 unless correctness passed
 *
 * Dawn's instance is never released (webgpu-device.ts): `adapters` ends with process.exit.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { adapterDevice, type DawnModule } from '../src/engine/webgpu/webgpu-device.js';
import type { EngineDevice } from '../src/engine/engine.js';
import { runCorrectness, runDevices, type CorrectnessReport, type DevicesReport } from './gpu-check-runs.js';
import type { GpuRow } from './gpu.js';

interface AdapterRow extends EngineDevice {
  /** The requestAdapter options that returned it. */
  asked: string[];
  architecture: string;
}
export interface AdaptersReport {
  adapters: AdapterRow[];
  /** The adapter a plain requestAdapter() gives (what the webgpu engine opens). */
  chosen?: string;
  /** True when every adapter is a CPU implementation. */
  software: boolean;
  env: Record<string, string | undefined>;
}

const ASKS: [string, { powerPreference?: string }][] = [
  ['default', {}],
  ['high-performance', { powerPreference: 'high-performance' }],
  ['low-power', { powerPreference: 'low-power' }],
  ['fallback', { forceFallbackAdapter: true } as { powerPreference?: string }],
];

async function listAdapters(): Promise<AdaptersReport> {
  const dawn = (await import('webgpu')) as unknown as DawnModule;
  Object.assign(globalThis, dawn.globals);
  const gpu = dawn.create([]);
  (globalThis as { tandemCheckGpu?: unknown }).tandemCheckGpu = gpu; // referenced until process.exit
  const rows: AdapterRow[] = [];
  let chosen: string | undefined;
  for (const [label, options] of ASKS) {
    const adapter = await gpu.requestAdapter(options);
    if (!adapter) continue;
    const device = adapterDevice(adapter);
    const key = `${device.name}|${device.vendor}|${device.driver}`;
    if (label === 'default') chosen = key;
    const seen = rows.find(r => `${r.name}|${r.vendor}|${r.driver}` === key);
    if (seen) seen.asked.push(label);
    else rows.push({ ...device, architecture: adapter.info?.architecture ?? '', asked: [label] });
  }
  const env = Object.fromEntries(
    ['VK_DRIVER_FILES', 'VK_ICD_FILENAMES', 'LD_LIBRARY_PATH'].map(k => [k, process.env[k]] as const),
  );
  return { adapters: rows, chosen, software: rows.every(r => r.software), env };
}

async function adapters(out: string, acceptSoftware: boolean): Promise<number> {
  const report = await listAdapters();
  writeFileSync(out, JSON.stringify(report, null, 2) + '\n');
  for (const a of report.adapters)
    console.log(
      `adapter: ${a.name} | vendor ${a.vendor || '?'} | driver ${a.driver || '?'} | ${a.architecture || '?'}` +
        `${a.software ? ' | SOFTWARE (CPU)' : ''} | asked: ${a.asked.join(', ')}`,
    );
  if (report.adapters.length === 0) {
    console.log('adapter: none (Dawn found no Vulkan device: no loader, or no ICD)');
    return 2;
  }
  if (report.software && !acceptSoftware) return 3;
  return 0;
}

function readJson<T>(file: string): T | undefined {
  if (!existsSync(file)) return undefined;
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as T;
  } catch {
    return undefined;
  }
}

/** A row of bench/gpu.ts's JSON, as the summary reads it. */
type BenchRow = Pick<GpuRow, 'model' | 'gpus' | 'globalBatch' | 'samplesPerSecond' | 'stepMs' | 'speedup'> & {
  software: boolean;
};
interface TorchRow {
  model: string;
  precision: string;
  batch: number;
  samplesPerSecond: number;
  msPerStep: number;
}
interface TorchReport {
  device?: string;
  torch?: string;
  skipped?: string;
  rows?: TorchRow[];
}

const f1 = (n: number) => n.toFixed(1);

function summaryLines(dir: string, seconds: string, budget: string): { lines: string[]; ok: boolean } {
  const lines = [`== tandem GPU check: ${seconds} s of a ${budget} s budget ==`];
  const ad = readJson<AdaptersReport>(path.join(dir, 'adapters.json'));
  const label = ad?.software ? '  [software Vulkan, not a GPU measurement]' : '';
  for (const a of ad?.adapters ?? []) lines.push(`adapter: ${a.name} (${a.vendor}; ${a.driver})${label}`);
  const c = readJson<CorrectnessReport>(path.join(dir, 'correctness.json'));
  if (!c) lines.push('correctness: NOT RUN or did not finish');
  for (const r of c?.rows ?? [])
    lines.push(
      `correctness ${r.ok ? 'ok  ' : 'FAIL'} ${r.what}: max |diff| ${r.maxDiff.toExponential(2)} ` +
        `(tolerance ${c!.tolerance})`,
    );
  const d = readJson<DevicesReport>(path.join(dir, 'devices.json'));
  for (const r of d?.rows ?? [])
    lines.push(
      `one GPU, ${r.devices} device(s), ${r.model} batch ${r.globalBatch}: ${f1(r.samplesPerSecond)} samples/s, ` +
        `step ${f1(r.stepMs)} ms = compute ${f1(r.computeMs)} + exchange ${f1(r.exchangeMs)}/group + update ` +
        `${f1(r.updateMs)}${label}`,
    );
  const b = readJson<{ rows: BenchRow[] }>(path.join(dir, 'bench.json'));
  if (!b) lines.push('bench gpu: NOT RUN or did not finish');
  for (const r of b?.rows ?? [])
    lines.push(
      `bench gpu ${r.model}, ${r.gpus} GPU process(es), batch ${r.globalBatch}: ${f1(r.samplesPerSecond)} ` +
        `samples/s, ${f1(r.stepMs)} ms/step${r.speedup ? `, ${r.speedup.toFixed(2)}x` : ''}` +
        `${r.software ? '  [software Vulkan, not a GPU measurement]' : ''}`,
    );
  const torch = readJson<TorchReport>(path.join(dir, 'torch.json'));
  if (torch?.skipped) lines.push(`pytorch: skipped: ${torch.skipped}`);
  for (const r of torch?.rows ?? [])
    lines.push(
      `pytorch ${torch!.torch} on ${torch!.device}, ${r.model} ${r.precision} batch ${r.batch}: ` +
        `${f1(r.samplesPerSecond)} samples/s, ${f1(r.msPerStep)} ms/step`,
    );
  const ok = !!c && c.rows.length > 0 && c.rows.every(r => r.ok);
  lines.push(`result: ${ok ? 'correctness passed' : 'CORRECTNESS FAILED OR MISSING'}`);
  return { lines, ok };
}

async function main(): Promise<number> {
  const { positionals, values } = parseArgs({
    allowPositionals: true,
    options: {
      out: { type: 'string' },
      dir: { type: 'string' },
      quick: { type: 'boolean' },
      'accept-software': { type: 'boolean' },
      seconds: { type: 'string' },
      budget: { type: 'string' },
    },
  });
  const need = (v: string | undefined, flag: string) => {
    if (!v) throw new Error(`gpu-check ${positionals[0]}: ${flag} is required`);
    return v;
  };
  switch (positionals[0]) {
    case 'adapters':
      return adapters(need(values.out, '--out'), values['accept-software'] === true);
    case 'correctness':
      return runCorrectness(need(values.out, '--out'), values.quick === true);
    case 'devices':
      return runDevices(need(values.out, '--out'), values.quick === true);
    case 'summary': {
      const { lines, ok } = summaryLines(need(values.dir, '--dir'), values.seconds ?? '?', values.budget ?? '?');
      console.log(lines.join('\n'));
      return ok ? 0 : 1;
    }
    default:
      throw new Error(`gpu-check: unknown subcommand '${positionals[0]}' (adapters, correctness, devices, summary)`);
  }
}

main().then(
  code => process.stdout.write('', () => process.exit(code)),
  (err: unknown) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
    process.stdout.write('', () => process.exit(1));
  },
);
