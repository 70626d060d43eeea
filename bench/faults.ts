/**
 * `npm run bench -- faults`: the fault matrix. For every phase (load, forward,
 * backward, exchange, update) and fault (exception, thread exit, hang), one
 * 2-device run in a child process with the fault injected on one device;
 * prints the outcome (error code, and whether device, step and phase were
 * named), the seconds from the start of the run to the rejection, and
 * whether the process then exited on its own (no thread left behind).
 */
import { execFile } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const RUNNER = fileURLToPath(new URL('./fault-run.js', import.meta.url));
const PHASES = ['load', 'forward', 'backward', 'exchange', 'update'];
const KINDS = ['throw', 'exit', 'hang'];

function run(args: string[]): Promise<{ exitCode: number; stdout: string; wallS: number }> {
  const t0 = performance.now();
  return new Promise(resolve =>
    execFile(process.execPath, [RUNNER, ...args], { timeout: 120_000 }, (err, stdout) =>
      resolve({ exitCode: err ? 1 : 0, stdout, wallS: (performance.now() - t0) / 1000 }),
    ),
  );
}

export async function runFaultMatrix(out: string, stallTimeoutMs: number): Promise<void> {
  console.log(
    `fault matrix: mlp, 2 devices, cpu backend, fault on device 1 at step 3; hangs detected by the watchdog ` +
      `(stallTimeoutMs ${stallTimeoutMs})`,
  );
  console.log(
    '| phase | fault | outcome | names device/step/phase | seconds to reject | process exited on its own ' +
      '|\n|---|---|---|---|---:|---|',
  );
  const rows: Record<string, unknown>[] = [];
  for (const phase of PHASES) {
    for (const kind of KINDS) {
      const r = await run(['1', '3', phase, kind, String(stallTimeoutMs)]);
      const o = JSON.parse(r.stdout.trim().split('\n').pop() || '{}') as {
        outcome?: string;
        code?: string;
        seconds?: number;
        context?: { device: number; step: number; phase: string };
      };
      const named = o.context?.device === 1 && o.context?.step === 3 && o.context?.phase === phase;
      console.log(
        `| ${phase} | ${kind} | ${o.outcome === 'rejected' ? o.code : (o.outcome ?? 'no output')} | ` +
          `${named ? 'yes' : 'NO'} | ${o.seconds?.toFixed(2) ?? '-'} | ${r.exitCode === 0 ? 'yes' : 'NO'} |`,
      );
      rows.push({
        phase,
        kind,
        outcome: o.outcome,
        code: o.code,
        named,
        seconds: o.seconds,
        exitedCleanly: r.exitCode === 0,
      });
    }
  }
  mkdirSync(out, { recursive: true });
  writeFileSync(
    `${out}/faults.json`,
    JSON.stringify({ bench: 'faults', date: new Date().toISOString(), stallTimeoutMs, rows }, null, 2),
  );
  console.log(`\nJSON: ${out}/faults.json`);
}
