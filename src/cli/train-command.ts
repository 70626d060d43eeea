/** `tandem train`: parse the flags, run, show progress, stop on signals, print the summary. */
import { startTraining } from '../trainer/train.js';
import { TandemError } from '../errors.js';
import type { TrainConfig } from '../config-types.js';
import { resolveConfig } from '../config.js';
import { claimOutputs } from '../output/claim-outputs.js';
import { elasticOf } from '../world/elastic-config.js';
import { hostFieldsFromEnv, type HostFields } from '../world/host-args.js';
import { describeProcess } from '../world/topology.js';
import { gpuProcess } from '../world/resolve-hosts.js';
import { describeEngineDevice, type EngineDevice } from '../engine/engine.js';
import { parseTrainArgs } from './parse-train-args.js';
import { ProgressDisplay } from './progress-display.js';
import { stopOnSignals } from './stop-signals.js';
import { abortWhenLauncherGoes } from './launcher-link.js';
import { autoEvent, autoLines } from './auto-choice-lines.js';
import { printSummary } from './train-summary.js';
import { loadCliPlugins } from './cli-plugins.js';

/** `config` with the host fields that are set (no undefined keys added). */
function withHostFields(config: TrainConfig, hosts: HostFields): TrainConfig {
  const out: TrainConfig = { ...config };
  if (hosts.hosts !== undefined) out.hosts = hosts.hosts;
  if (hosts.hostRank !== undefined) out.hostRank = hosts.hostRank;
  if (hosts.rendezvous !== undefined) out.rendezvous = hosts.rendezvous;
  return out;
}

/**
 * What this process's devices run on, in one line (every device on the same adapter: once), e.g. `GPU process 1: webgpu
 * on nvidia-h200 (…)`.
 */
function engineDeviceLine(config: TrainConfig, backend: string, devices: EngineDevice[]): string {
  const who =
    (config.hosts ?? 1) > 1
      ? `${describeProcess({ processKind: gpuProcess() ? 'gpu' : 'host' }, config.hostRank ?? 0)}: `
      : '';
  const lines = devices.map(describeEngineDevice);
  if (lines.every(l => l === lines[0]))
    return `${who}${backend} on ${lines[0]}${devices.length > 1 ? ` (all ${devices.length} devices)` : ''}`;
  return `${who}${backend} on: ${lines.map((l, d) => `device ${d}: ${l}`).join('; ')}`;
}

/**
 * What `tandem train ARGS` checks before it starts anything (flags, the config and its elasticity, then the places it
 * writes: created, probed, and their run lock taken and given back); `tandem launch` runs it on host 0's command line
 * before it starts a process, so a bad flag, an `--out` that cannot be written or one another run holds fails there,
 * once, with the message and code train would give, instead of in every process after they all started. `notice`: a
 * stale lock taken over.
 */
export async function checkTrainArgs(args: string[], notice: (message: string) => void): Promise<void> {
  await loadCliPlugins(args);
  const { config } = parseTrainArgs(args, 'train');
  const resolved = await resolveConfig(config);
  elasticOf(config, resolved); // --min-hosts more than --hosts, with the shm transport…
  const lock = await claimOutputs(resolved, notice); // host 0 writes: its outputs are set, another host's are not
  await lock.release();
}

export async function trainCommand(args: string[]): Promise<number> {
  await loadCliPlugins(args);
  const parsed = parseTrainArgs(args, 'train');
  const { json, quiet, verbose } = parsed;
  const config = withHostFields(parsed.config, hostFieldsFromEnv(parsed.config, process.env));
  const host = (config.hosts ?? 1) > 1 ? (config.hostRank ?? 0) : undefined;
  const progress = new ProgressDisplay({ json, quiet, tty: process.stdout.isTTY === true, host, verbose });
  const run = startTraining(config, {
    onAutoChoice(choice) {
      if (json) console.log(JSON.stringify(autoEvent(choice)));
      else if (!quiet) console.log(autoLines(choice).join('\n'));
    },
    onStep: m => progress.step(m),
    onSpans: spans => progress.spans(spans),
    onEvent: e => {
      // Every process says what its devices run on (muted hosts too: with launch --gpus, each GPU process's line).
      if (e.type === 'started' && e.engineDevices && !json && !quiet)
        console.log(engineDeviceLine(config, e.backend, e.engineDevices));
      progress.event(e);
    },
  });
  const signals = stopOnSignals(run, line => console.error(line));
  const unlinkLauncher = abortWhenLauncherGoes(run, line => console.error(line));
  let summary: Awaited<typeof run.done>;
  try {
    summary = await run.done;
  } catch (err) {
    if (!(signals.received && err instanceof TandemError && err.code === 'ABORTED')) throw err;
    console.error(`tandem: ${err.message}`);
    return signals.exitCode;
  } finally {
    signals.dispose();
    unlinkLauncher();
  }
  printSummary(summary, json, verbose);
  if (summary.stoppedAt === undefined || summary.earlyStop) return 0; // early stopping: the run's own end
  const checkpoint =
    summary.checkpointPath ??
    (summary.config.topology.process > 0 ? "host 0's" : 'none (give --checkpoint-dir or --out)');
  console.error(
    `tandem: stopped after step ${summary.stoppedAt} on ${signals.received ?? 'request'}; checkpoint: ${checkpoint}`,
  );
  return signals.exitCode || 130;
}
