/**
 * Can the `webgpu` engine run here? Answered on the main thread before any
 * device thread starts, synchronously (an engine's `unavailable()` is): the
 * `webgpu` package must resolve, and Dawn must find an adapter. The adapter
 * is asked for in a short-lived child process (webgpu-probe.ts), so that the
 * main process never creates a Dawn instance (Dawn's exit problem, see
 * webgpu-device.ts) and a driver that crashes while loading takes only the
 * child down. Costs one node start (~0.5 s) once per process; the answer is
 * cached.
 */
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const PROBE = fileURLToPath(new URL('./webgpu-probe.js', import.meta.url));
const PROBE_TIMEOUT_MS = 60_000;

export const WEBGPU_DRIVER_HOW_TO =
  "install a Vulkan driver: a GPU's own (NVIDIA, AMD, Intel), or Mesa's software one, " +
  ("mesa-vulkan-drivers >= 25 (Debian 12: `apt-get install -t bookworm-backports mesa-vulkan-drivers`; Debian 12's " +
    'own 22.3 gives Dawn no adapter)');

export type WebGpuProbe = { kind: 'ok'; adapter: string } | { kind: 'unavailable'; reason: string };

let cached: WebGpuProbe | undefined;

/** The adapter Dawn finds on this machine, or why there is none (with the fix). Cached per process. */
export function probeWebGpu(): WebGpuProbe {
  cached ??= runProbe();
  return cached;
}

/** Only whether the `webgpu` package resolves (no adapter asked for). */
export function probeWebGpuPackage(): WebGpuProbe {
  try {
    require.resolve('webgpu');
    return { kind: 'ok', adapter: 'not asked' };
  } catch {
    return {
      kind: 'unavailable',
      reason: "the npm package 'webgpu' (Dawn's Node bindings) is not installed; npm install webgpu@0.6.2",
    };
  }
}

function runProbe(): WebGpuProbe {
  const pkg = probeWebGpuPackage();
  if (pkg.kind !== 'ok') return pkg;
  const r = spawnSync(process.execPath, [PROBE], { encoding: 'utf8', timeout: PROBE_TIMEOUT_MS, env: process.env });
  const line = (r.stdout ?? '').trim().split('\n').pop() ?? '';
  let answer: { adapter?: string | null; error?: string } | undefined;
  try {
    answer = JSON.parse(line);
  } catch {
    /* reported below */
  }
  if (answer?.error !== undefined) {
    return {
      kind: 'unavailable',
      reason: `the npm package 'webgpu' (Dawn's Node bindings) did not load: ${answer.error}`,
    };
  }
  if (answer?.adapter) return { kind: 'ok', adapter: answer.adapter };
  if (answer?.adapter === null) {
    const noDriver = /found no drivers|VK_ERROR_INCOMPATIBLE_DRIVER/i.test(r.stderr ?? '');
    return {
      kind: 'unavailable',
      reason:
        `Dawn found no WebGPU adapter (${noDriver ? 'no Vulkan driver' : 'no usable Vulkan device'}); ` +
        `${WEBGPU_DRIVER_HOW_TO}`,
    };
  }
  const how = r.error ? r.error.message : r.signal ? `killed by ${r.signal}` : `exit code ${r.status}`;
  const err = (r.stderr ?? '').trim().split('\n').slice(-3).join(' | ');
  return {
    kind: 'unavailable',
    reason: `the WebGPU probe process failed (${how})${err ? `: ${err}` : ''}; ${WEBGPU_DRIVER_HOW_TO}`,
  };
}
