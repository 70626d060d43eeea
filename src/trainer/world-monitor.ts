/**
 * One view of a run of several hosts, on host 0. Host 0 serves a monitor hub
 * (world/monitor-hub.ts); every other host links to it (world/monitor-link.ts)
 * and sends its step shares, spans and warnings. On host 0 the hooks (and so
 * `metrics$`, `timeline$`, `events$`, the CLI's display and the trace) see the
 * world: step metrics over every device of every host, every host's spans
 * (stamped with `host`), the other hosts' warnings. On the other hosts they
 * see that host alone, events stamped with it. One process: the hooks as given.
 */
import { lrAt } from '../optim/lr-schedule.js';
import { batchSamplesAt } from '../data/sampler.js';
import { deviceShare } from '../actors/device-share.js';
import { stepLoss } from './step-loss.js';
import type { ResolvedConfig } from '../config-types.js';
import type { Span } from '../monitor/span.js';
import type { HostChannel } from '../world/host-channel.js';
import { MonitorHub, type WorldStep } from '../world/monitor-hub.js';
import { MonitorLink } from '../world/monitor-link.js';
import type { HostStep } from '../world/monitor-frames.js';
import { failedEvent } from './run-streams.js';
import type { StepMetrics, TrainHooks } from './run-types.js';

type History = { step: number; loss: number; accuracy: number }[];

export class WorldMonitor {
  readonly hooks: TrainHooks;
  private hub?: MonitorHub;
  private link?: MonitorLink;
  private readonly worldHistory = new Map<number, { step: number; loss: number; accuracy: number }>();

  constructor(
    private readonly cfg: ResolvedConfig,
    private readonly outer: TrainHooks,
  ) {
    const { processes, process: host } = cfg.topology;
    this.hooks =
      processes === 1
        ? outer
        : {
            ...outer,
            onEvent: e => {
              const stamped = { ...e, host: e.host ?? host };
              outer.onEvent?.(stamped);
              if (stamped.type === 'warning' && stamped.host === host) this.link?.event(stamped);
            },
            onSpans: spans => {
              outer.onSpans?.(spans);
              this.link?.spans(spans);
            },
          };
  }

  /** Several hosts, once the host channel is open: host 0 listens (at the rendezvous address), the others connect. */
  async open(channel: HostChannel, recordSpans: (spans: Span[]) => void): Promise<void> {
    const { topology, rendezvous } = this.cfg;
    if (topology.processes === 1 || !rendezvous) return;
    if (topology.process === 0) {
      this.hub = await MonitorHub.listen(rendezvous.host, topology.processes, {
        step: w => this.worldStep(w),
        spans: recordSpans,
        event: e => this.outer.onEvent?.(e),
      });
      await channel.publishMonitorPort(this.hub.port);
      return;
    }
    const port = await channel.monitorPort();
    try {
      this.link = await MonitorLink.connect(rendezvous.host, port, topology.process);
    } catch (err) {
      this.hooks.onEvent?.({
        type: 'warning',
        step: 0,
        message:
          `cannot reach host 0's monitor at ${rendezvous.host}:${port} ` +
          `(${(err as Error).message}): host 0 shows no metrics, spans or warnings of this host`,
      });
    }
  }

  /**
   * A step of this host: host 0 (several hosts) waits for every host's share; otherwise the hooks get `metrics` now.
   */
  step(share: HostStep, metrics: StepMetrics): void {
    if (this.hub) {
      this.hub.share(0, share);
      return;
    }
    this.outer.onStep?.(metrics);
    this.link?.step(share);
  }

  /**
   * Training ended here: the others send their last frames; host 0 waits for them (a lost host is not waited for). Host
   * 0 gets the world's history.
   */
  async finish(history: History): Promise<History> {
    if (this.link) await this.link.end();
    if (!this.hub) return history;
    await this.hub.ended(this.cfg.stallTimeoutMs);
    if (this.hub.dropped > 0) {
      this.hooks.onEvent?.({
        type: 'warning',
        step: 0,
        message:
          `the other hosts dropped ${this.hub.dropped} span message(s) that host 0 read too slowly: the ` +
          `trace misses them`,
      });
    }
    return history.map(h => this.worldHistory.get(h.step) ?? h);
  }

  /** The run failed here: a host other than 0 tells host 0 (as its last frame). */
  async failed(err: unknown): Promise<void> {
    if (!this.link) return;
    this.link.event({ ...failedEvent(err), host: this.cfg.topology.process });
    await this.link.end();
  }

  async close(): Promise<void> {
    this.link?.close();
    await this.hub?.close();
  }

  private worldStep(w: WorldStep): void {
    const { cfg } = this;
    const samples = batchSamplesAt(cfg.trainSize, cfg.batch, cfg.partialBatch, w.step);
    const counts = w.losses.map((_, rank) => deviceShare(cfg, w.step, rank).samples);
    const loss = stepLoss(w.losses, counts, cfg.perDevice);
    const accuracy = w.correct / samples;
    this.worldHistory.set(w.step, { step: w.step, loss, accuracy });
    this.outer.onStep?.({
      step: w.step,
      loss,
      accuracy,
      lr: lrAt(cfg.lrSchedule, cfg.optimizer.lr, w.step),
      stepMs: w.stepMs,
      samplesPerSecond: samples / (w.stepMs / 1000),
      computeMs: w.computeMs,
      numTensors: w.numTensors,
      dataWaitMs: w.dataWaitMs,
    });
  }
}
