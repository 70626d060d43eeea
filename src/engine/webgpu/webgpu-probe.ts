/**
 * Child-process entry that asks Dawn (npm `webgpu`) for an adapter and prints
 * one JSON line: `{ "adapter": "<description>" }`, `{ "adapter": null }` or
 * `{ "error": "<why the package did not load>" }`. The webgpu engine runs it
 * from the main thread before any device thread starts, in a process of its
 * own so that the main process never holds a Dawn instance (whose release at
 * exit hangs or crashes with stdout on a pipe). It keeps the GPU object
 * referenced and ends with process.exit, the exit that is clean.
 */
import { describeAdapter, dawnOptions, type DawnModule } from './webgpu-device.js';

async function probe(): Promise<string> {
  let dawn: DawnModule;
  try {
    dawn = (await import('webgpu')) as unknown as DawnModule;
  } catch (e) {
    return JSON.stringify({ error: e instanceof Error ? e.message : String(e) });
  }
  Object.assign(globalThis, dawn.globals);
  const gpu = dawn.create(dawnOptions());
  (globalThis as { tandemProbeGpu?: unknown }).tandemProbeGpu = gpu; // referenced until process.exit
  const adapter = await gpu.requestAdapter();
  return JSON.stringify({ adapter: adapter ? describeAdapter(adapter) : null });
}

probe().then(
  line => {
    process.stdout.write(line + '\n', () => process.exit(0));
  },
  e => {
    process.stdout.write(JSON.stringify({ error: e instanceof Error ? e.message : String(e) }) + '\n', () =>
      process.exit(0),
    );
  },
);
