/** The `tandem` command line. */
import { startTraining, train } from '../trainer/train.js';
import { TandemError } from '../errors.js';
import { parseTrainArgs, withFlagName } from './parse-train-args.js';
import { resolveConfig } from '../config.js';
import { claimOutputs } from '../output/claim-outputs.js';
import { profileModel } from '../profiling/profile-model.js';
import { decideAlexNetLike } from '../profiling/alexnet-like.js';
import { predictStrategies } from '../profiling/cost-model.js';
import { profileReport } from './profile-report.js';
import { traceCommand } from './trace-command.js';
import { ProgressDisplay } from './progress-display.js';
import { stopOnSignals } from './stop-signals.js';
import { guardStdio } from './stdio-guard.js';
import { hostFieldsFromEnv, type HostFields } from '../world/host-args.js';
import { launchHosts } from '../world/launch.js';
import { abortWhenLauncherGoes } from './launcher-link.js';
import type { TrainConfig } from '../config-types.js';
import type { AutoChoice } from '../profiling/choose-strategy.js';
import { linkBitsPerSecond } from '../profiling/link-fit.js';
import { describeEngineDevice, type EngineDevice } from '../engine/engine.js';
import { describeProcess } from '../world/topology.js';
import { gpuProcess } from '../world/resolve-hosts.js';

/** `config` with the host fields that are set (no undefined keys added). */
function withHostFields(config: TrainConfig, hosts: HostFields): TrainConfig {
  const out: TrainConfig = { ...config };
  if (hosts.hosts !== undefined) out.hosts = hosts.hosts;
  if (hosts.hostRank !== undefined) out.hostRank = hosts.hostRank;
  if (hosts.rendezvous !== undefined) out.rendezvous = hosts.rendezvous;
  return out;
}

const HELP = `tandem — train TensorFlow.js models on several devices at once

  tandem train [--config FILE.json] [--model NAME|PATH] [--data NAME|PATH] [--devices N]
               [--backend native|wasm|cpu|tensorflow|webgpu] [--native-threads N] [--no-native-fusion]
               [--batch GLOBAL] [--steps N | --epochs N]
               [--optimizer sgd|momentum|adam|rmsprop|adagrad|adamax|adadelta] [--lr X] [--seed N]  (default: a saved model's compiled optimizer, else sgd)
               [--momentum X] [--nesterov] [--beta1 X] [--beta2 X] [--epsilon X] [--rho X] [--decay X] [--centered] [--initial-accumulator X]
                                              (tfjs's optimizers and their own hyper-parameters only: sgd/momentum --momentum --nesterov;
                                               adam --beta1 --beta2 --epsilon; rmsprop --decay --momentum --epsilon --centered;
                                               adagrad --initial-accumulator; adamax --beta1 --beta2 --epsilon --decay; adadelta --rho --epsilon)
               [--strategy sequential|two-group|per-layer|buckets|auto] [--split-layer P]
               [--bucket-mb MB] [--first-bucket-mb MB] [--exchange-order ready|priority] [--chunk-floats N] [--all-reduce sharded|primary] [--local-update shard|replica]
               [--transport NAME] [--plugin MODULE …]  (a plugin registers a transport, method or engine)
               [--batch-norm sync|local]      (sync: global-batch statistics, as one engine; local: per device)
               [--forward-wait group|step]    (group: wait for each group's update just before the layer using it)
               [--loss categorical|binary|mse|mae|huber|logcosh|msle|mape|poisson]
                                              (default: a saved model's compiled loss, else read from its output; mse and
                                               after: regression, one output on a data module's float targets; huber: delta 1)
               [--link BANDWIDTH[:LATENCY]]   (EMULATED link, e.g. 1gbps, 10gbps:0.05ms)
               [--trace FILE.json]            (Chrome trace: Perfetto / chrome://tracing)
               [--classes C] [--image-size HxW[xC]] [--dataset-size N]
               [--method data-parallel|local-head|partial-fc] [--embedding E] [--head linear|cosine]
               [--scale S] [--margin M] [--sample-rate R] [--held-out N] [--eval-samples N] [--export-device D] [--export-classifier (needs --out)]
               [--on-nan error|skip-step] [--checkpoint-every K] [--checkpoint-dir DIR] [--resume DIR|FILE]
               [--keep-checkpoints K]         (the K newest checkpoints are kept; default 3, 0 keeps all)
               [--stop-grace-ms MS]           (how long a stopped step may take; default 5000)
               [--replica-check-every K]      (compare every replica's parameter bits every K steps; default 100, 0: off)
               [--stall-timeout-ms MS]        (watchdog: a silent device fails the run after MS, a silent peer host after 2 × MS; default 120000)
               [--out DIR] [--json] [--quiet] [--verbose]  (--verbose: a host other than 0 shows its own progress too)
  Each flag once (--plugin repeats); counts in decimal digits (--steps 200), real values also in exponent notation (--lr 1e-3).
  SIGINT/SIGTERM/SIGHUP finish the current step, write a checkpoint (to --checkpoint-dir or --out) and exit with
  130/143/129; a second one (or the step still running after --stop-grace-ms) aborts the step and checkpoints the
  last completed step. Output to a closed pipe (| head) is dropped; training goes on.

  Several hosts (transport hierarchical, or gloo with --transport gloo; shm when the rendezvous is loopback: one machine): every host runs the same command with
               --hosts N --host-rank R --rendezvous HOST:PORT   (host 0's address; host 0 serves the store there)
  (or TANDEM_HOSTS, TANDEM_HOST_RANK, TANDEM_RENDEZVOUS; rank and size also from mpirun's OMPI_COMM_WORLD_RANK/SIZE
  or Slurm's SLURM_PROCID/NTASKS). --devices is the devices per host; --batch the global batch over all hosts.
  Host 0 shows the world (metrics over every device, every host's warnings; --trace: a process per host); the other
  hosts print warnings, errors and a final line (--verbose: their own progress too).

  tandem launch --hosts N [train flags…]   (N local processes on 127.0.0.1, output prefixed [host R]; one failing ends all;
               the train flags are checked as train checks them before any process starts)
  tandem launch --gpus N [train flags…]    (a process per GPU of this machine, each pinned to its GPU and one device,
               joined like hosts, output prefixed [gpu K]; no GPU: N processes share the software Vulkan driver)
  tandem launch --gpus N --hosts H --host-rank R --rendezvous HOST:PORT [train flags…]
               (on each of H machines: its N GPU processes, ranks R×N…R×N+N-1; without --host-rank: H×N local processes)

  tandem trace TRACE.json --svg OUT.svg [--png OUT.png] [--steps A..B | --last N | --all]
               (draws a trace written by --trace or --out; default: the last 3 steps)

  tandem profile --model NAME|PATH [--data …] [--batch GLOBAL] [--devices N] [--steps N]
               [--time-share X] [--param-share X] [--link BANDWIDTH] [--json]

  --strategy auto profiles first (across hosts: every host times all-reduces over the host link, α + β·bytes),
  then picks the schedule the cost model predicts fastest (strategy, --forward-wait, --exchange-order, --chunk-floats);
  --comm-hook auto lets it pick a hook too (fp16, powersgd: they change the loss; default: no hook).

Models: mlp, alexnet-mini, alexnet, convnet-gap, resnet-mini, mobilenet-mini, an ES module (tf, options) => tf.LayersModel,
        or a TensorFlow.js layers model.json (trained from its weights and written back in the same format).
Data:   mnist, synthetic-images, or an ES module (options) => Dataset.`;

/** What this process's devices run on, in one line (every device on the same adapter: once), e.g. `GPU process 1: webgpu on nvidia-h200 (…)`. */
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

/** `--json`: the auto event, with the link, the CPU ceiling's inputs and every candidate's prediction. */
function autoEvent(c: AutoChoice): Record<string, unknown> {
  return {
    event: 'auto',
    strategy: c.strategy,
    splitLayer: c.splitLayer,
    forwardWait: c.forwardWait,
    exchangeOrder: c.exchangeOrder,
    chunkFloats: c.chunkFloats,
    commHook: c.commHook,
    predictedMs: c.predictedMs,
    reason: c.reason,
    link: c.link && {
      alphaMs: c.link.alphaMs,
      bitsPerSecond: linkBitsPerSecond(c.link),
      source: c.link.source,
      samples: c.link.samples,
      cpuAlphaMs: c.link.cpuAlphaMs,
      cpuMsPerWireByte: c.link.cpuMsPerWireByte,
    },
    cpu: { ...c.cpu, cpuMsPerStep: c.cpuMsPerStep, bound: c.cpuBound },
    candidates: c.candidates.map(x => ({
      key: x.key,
      predictedMs: x.predictedMs,
      splitLayer: x.splitLayer,
      cpuMsPerStep: x.cpuMsPerStep,
      cpuBound: x.cpuBound,
    })),
  };
}

/** What `auto` prints beside its event's line (the reason: the link, the profile, the top candidates): the flags it set. */
function autoLines(c: AutoChoice): string[] {
  return [
    `auto: runs --strategy ${c.strategy}${c.splitLayer ? ` --split-layer ${c.splitLayer}` : ''} --forward-wait ${c.forwardWait} ` +
      `--exchange-order ${c.exchangeOrder}${c.chunkFloats ? ` --chunk-floats ${c.chunkFloats}` : ''}${c.commHook ? ` --comm-hook ${c.commHook}` : ''}: predicted ${c.predictedMs.toFixed(1)} ms/step`,
  ];
}

/**
 * What `tandem train ARGS` checks before it starts anything (flags, the config, then the places it writes: created,
 * probed, and their run lock taken and given back); `tandem launch` runs it on host 0's command line before it starts
 * a process, so a bad flag, an `--out` that cannot be written or one another run holds fails there, once, with the
 * message and code train would give, instead of in every process after they all started. `notice`: a stale lock taken over.
 */
async function checkTrainArgs(args: string[], notice: (message: string) => void): Promise<void> {
  const resolved = await resolveConfig(parseTrainArgs(args, 'train').config);
  const lock = await claimOutputs(resolved, notice); // host 0 writes: its outputs are set, another host's are not
  await lock.release();
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (rest.includes('--help') || rest.includes('-h')) {
    // `tandem train --help`: every command's flags are in the one help
    console.log(HELP);
    return 0;
  }
  switch (command) {
    case undefined:
    case '--help':
    case '-h':
    case 'help':
      console.log(HELP);
      return 0;
    case 'train': {
      const parsed = parseTrainArgs(rest, 'train');
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
      const { weights, history, ...rest2 } = summary;
      void weights;
      void history;
      const { topology } = summary.config;
      if (json) console.log(JSON.stringify({ event: 'summary', ...rest2 }));
      else if (topology.process > 0 && !verbose) {
        console.log(
          `${describeProcess(topology, topology.process)} of ${topology.processes} done: ${summary.steps} steps, replica checksum ${summary.replicaChecksum} ` +
            `(${describeProcess(topology, 0)} shows the world and writes the outputs)`,
        );
      } else {
        console.log(
          `done: ${summary.steps} steps on ${summary.config.devices} device(s) (${summary.config.backend}), ` +
            `final loss ${summary.finalLoss.toFixed(4)}, ${Number.isNaN(summary.finalAccuracy) ? '' : `batch accuracy ${(summary.finalAccuracy * 100).toFixed(1)}%, `}` + // regression: no accuracy
            `${summary.samplesPerSecond.toFixed(0)} samples/s`,
        );
        if (topology.processes > 1)
          console.log(
            `${describeProcess(topology, topology.process)} of ${topology.processes}: replica checksum ${summary.replicaChecksum}` +
              `${topology.process === 0 ? '' : ` (${describeProcess(topology, 0)} writes the outputs)`}`,
          );
        if (summary.link) console.log(`link: EMULATED ${summary.link.label} (exchange held to that link's speed)`);
        console.log(
          `strategy: ${summary.strategy.name} (${summary.strategy.groups.length} exchange group(s)); ` +
            `mean step ${summary.meanStepMs.toFixed(1)} ms, compute ${summary.timings.meanComputeMs.toFixed(1)} ms, exchange ${summary.timings.meanExchangeMs.toFixed(1)} ms per group`,
        );
        for (const sk of summary.skippedUpdates)
          console.warn(
            `warning: step ${sk.step}, group ${sk.group}: update skipped, non-finite gradient (first: ${sk.variable ?? 'unknown'})`,
          );
        if (summary.heldOut)
          console.log(
            `held-out accuracy: ${(summary.heldOut.accuracy * 100).toFixed(2)}% on ${summary.heldOut.samples} samples`,
          );
        const cl = summary.classifier;
        if (cl) {
          console.log(
            `${cl.method}: ${cl.classes} classes as ${cl.localClasses.join(' + ')} per device; classifier bytes per device ${cl.classifierBytesPerDevice.join(', ')}; ` +
              `exchanged per step ${(cl.exchangedBytesPerStep / 2 ** 20).toFixed(2)} MiB`,
          );
          if (cl.heldOut)
            console.log(
              `held-out (${cl.heldOut.samples} samples): nearest class-centre accuracy ${
                cl.heldOut.centreAccuracy === undefined
                  ? 'n/a (no odd-numbered held-out sample of a class with a centre: hold out more samples, --held-out, --eval-samples)'
                  : `${(cl.heldOut.centreAccuracy * 100).toFixed(1)}% (${cl.heldOut.centreProbes} probes)`
              }, ` + `full-classifier accuracy ${((cl.heldOut.classifierAccuracy ?? 0) * 100).toFixed(1)}%`,
            );
          if (cl.classifierPath) console.log(`classifier (all ${cl.classes} classes): ${cl.classifierPath}`);
        }
        if (summary.modelPath) console.log(`model${cl ? ' (feature extractor)' : ''}: ${summary.modelPath}`);
        if (summary.tracePath) console.log(`trace: ${summary.tracePath} (open in Perfetto or chrome://tracing)`);
        if (summary.timelinePath) console.log(`timeline picture: ${summary.timelinePath}`);
        if (summary.config.out) console.log(`summary: ${summary.config.out}/summary.json`);
      }
      if (summary.stoppedAt !== undefined) {
        const checkpoint =
          summary.checkpointPath ??
          (summary.config.topology.process > 0 ? "host 0's" : 'none (give --checkpoint-dir or --out)');
        console.error(
          `tandem: stopped after step ${summary.stoppedAt} on ${signals.received ?? 'request'}; checkpoint: ${checkpoint}`,
        );
        return signals.exitCode || 130;
      }
      return 0;
    }
    case 'launch':
      return launchHosts(
        rest,
        (prefix, line) =>
          (line.stream === 'stderr' ? process.stderr : process.stdout).write(`[${prefix}] ${line.text}\n`),
        line => console.error(`tandem launch: ${line}`),
        args => checkTrainArgs(args, line => console.error(`tandem launch: ${line}`)),
      );
    case 'trace':
      return traceCommand(rest);
    case 'profile': {
      const { config, json, profileSteps } = parseTrainArgs(rest, 'profile');
      if ((config.hosts ?? 1) > 1)
        throw new TandemError(
          'BAD_CONFIG',
          'tandem profile runs in one process: leave out --hosts (profile one host, then train with --hosts)',
        );
      const resolved = await resolveConfig({ ...config, strategy: 'sequential', steps: 1 });
      const profile = await profileModel({ ...config, strategy: 'sequential', steps: 1 }, train, {
        steps: profileSteps,
      });
      const verdict = decideAlexNetLike(profile.layers, {
        timeShare: config.timeShare ?? 0.25,
        paramShare: config.paramShare ?? 0.25,
      });
      const predictions = predictStrategies(profile, resolved.devices, resolved.strategyOptions, resolved.link);
      if (json)
        console.log(
          JSON.stringify({
            profile,
            verdict,
            predictions,
            link: resolved.link ? { ...resolved.link, emulated: true } : undefined,
          }),
        );
      else console.log(profileReport(profile, verdict, predictions, resolved.devices, resolved.link?.label));
      return 0;
    }
    default:
      throw new TandemError(
        'BAD_CONFIG',
        `unknown command '${command}'. Commands: train, launch, trace, profile. See tandem --help.`,
      );
  }
}

guardStdio();
main(process.argv.slice(2)).then(
  code => {
    process.exitCode = code;
  },
  (err: unknown) => {
    if (err instanceof TandemError) console.error(`tandem: ${withFlagName(err.message)}`);
    else console.error(err);
    process.exitCode = 1;
  },
);
