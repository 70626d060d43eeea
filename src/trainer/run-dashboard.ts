/**
 * A run's dashboard feed (monitor/dashboard-feed.ts), fed from its hooks as run-tensorboard.ts feeds the event files:
 * host 0's run (the caller decides), so across hosts it is the world's view. Its messages go to the live page
 * (`dashboard: PORT`, monitor/dashboard-server.ts) and to the event log `--out DIR/events.jsonl` (monitor/event-log.ts,
 * inside the run's locked --out), from which `tandem dashboard DIR` shows the finished run. A step is published once
 * every device has reported an update of a later step (its exchange reports come in order on one port, but on another
 * port than its step's metrics, so they can arrive after the next step's), once HOLD_STEPS later steps are held (a
 * schedule that does not exchange every step), or at the end.
 */
import path from 'node:path';
import { DashboardFeed, jsonSafe, type DashboardStep } from '../monitor/dashboard-feed.js';
import { serveDashboard, type DashboardServer } from '../monitor/dashboard-server.js';
import { EventLog } from '../monitor/event-log.js';
import { overlapShare, timelineSvg } from '../monitor/timeline-picture.js';
import type { Span } from '../monitor/span.js';
import type { TrainConfig } from '../config-types.js';
import { OUT_FILES } from '../output/output-places.js';
import { failedEvent } from './run-streams.js';
import { teeHooks } from './hook-tee.js';
import type { StepMetrics, TrainHooks, TrainSummary } from './run-types.js';

/** The timeline picture is redrawn at most this often, and only while a page is connected. */
const TIMELINE_MS = 2000;
const TIMELINE_STEPS = 3;
/** At most this many steps wait for their exchange reports. */
const HOLD_STEPS = 4;

export interface RunDashboard {
  hooks: TrainHooks;
  /** The run ended: its last step, the timeline, the summary; the pages are told it is over. */
  finish(summary: TrainSummary): void;
  fail(err: unknown): void;
  close(): Promise<void>;
}

/** Per step: the spans seen, until the step is published. */
class StepSpans {
  private readonly byStep = new Map<number, Span[]>();
  /** Per device, the latest step of which an update ('apply' span, one per group) was reported. */
  private readonly appliedUpTo: number[] = [];
  recent: Span[] = [];

  add(s: Span): void {
    const list = this.byStep.get(s.step) ?? [];
    list.push(s);
    this.byStep.set(s.step, list);
    this.recent.push(s);
    if (s.kind === 'apply') this.appliedUpTo[s.device] = Math.max(this.appliedUpTo[s.device] ?? 0, s.step);
  }

  /** Whether each of `devices` reported an update after `step`: every report of `step` is in. */
  reportedAfter(step: number, devices: number): boolean {
    for (let d = 0; d < devices; d++) if (!((this.appliedUpTo[d] ?? 0) > step)) return false;
    return true;
  }

  /** Step `m` with its spans' sums per device; the spans of steps up to it are let go. */
  take(m: StepMetrics): DashboardStep {
    const spans = this.byStep.get(m.step) ?? [];
    for (const step of this.byStep.keys()) if (step <= m.step) this.byStep.delete(step);
    this.recent = this.recent.filter(s => s.step > m.step - TIMELINE_STEPS);
    const devices = m.computeMs.length;
    const sum = (kind: Span['kind'], of: (s: Span) => number = s => s.end - s.start) => {
      const out = new Array<number>(devices).fill(0);
      for (const s of spans) if (s.kind === kind && s.device < devices) out[s.device] += of(s);
      return out;
    };
    const hosts = new Array<number>(devices).fill(0);
    for (const s of spans) if (s.device < devices) hosts[s.device] = s.host ?? 0;
    const { step, loss, accuracy, lr, samplesPerSecond, stepMs, computeMs, dataWaitMs } = m;
    return {
      ...{ step, loss, accuracy, lr, samplesPerSecond, stepMs, computeMs, dataWaitMs },
      exchangeMs: sum('exchange'),
      exchangeBytes: sum('exchange', s => s.bytes ?? 0),
      waitMs: sum('wait'),
      hosts,
      overlap: overlapShare(spans),
    };
  }
}

function titleOf(config: TrainConfig): string {
  const model = typeof config.model === 'string' ? config.model : 'a model';
  const strategy = typeof config.strategy === 'object' ? config.strategy.name : (config.strategy ?? 'default schedule');
  return `tandem: ${model}, ${config.devices ?? 'default'} devices, ${strategy}`;
}

/** The feed of a live run: its steps held until their spans are in, the timeline now and then. */
class LiveFeed {
  private readonly spans = new StepSpans();
  private readonly held: StepMetrics[] = [];
  private drawnAt = 0;

  constructor(
    readonly feed: DashboardFeed,
    private readonly title: string,
  ) {}

  step(m: StepMetrics): void {
    this.held.push(m);
    this.publishHeld(false);
    this.drawTimeline(false);
  }

  addSpans(list: readonly Span[]): void {
    for (const s of list) this.spans.add(s);
    this.publishHeld(false);
  }

  finish(summary: TrainSummary): void {
    this.publishHeld(true);
    this.drawTimeline(true);
    const { steps, finalLoss, finalAccuracy, samplesPerSecond, wallSeconds, stoppedAt, heldOut } = summary;
    const heldOutAccuracy = heldOut?.accuracy;
    this.feed.publish({
      kind: 'summary',
      summary: { steps, finalLoss, finalAccuracy, samplesPerSecond, wallSeconds, stoppedAt, heldOutAccuracy },
    });
    this.feed.publish({ kind: 'end' });
  }

  fail(err: unknown): void {
    this.publishHeld(true);
    this.feed.publish({ kind: 'event', event: failedEvent(err) });
    this.feed.publish({ kind: 'end' });
  }

  /** Redrawn at most every TIMELINE_MS while a page is connected (`force`: now). */
  private drawTimeline(force: boolean): void {
    if (!force && (this.feed.listening === 0 || performance.now() - this.drawnAt < TIMELINE_MS)) return;
    this.drawnAt = performance.now();
    if (this.spans.recent.length > 0)
      this.feed.publish({ kind: 'timeline', svg: timelineSvg(this.spans.recent, this.title) });
  }

  /** The held steps whose reports are in, in order (`all`: every one). */
  private publishHeld(all: boolean): void {
    while (this.held.length > 0) {
      const m = this.held[0];
      if (!all && this.held.length <= HOLD_STEPS && !this.spans.reportedAfter(m.step, m.computeMs.length)) return;
      this.held.shift();
      this.feed.publish({ kind: 'step', step: this.spans.take(m) });
    }
  }
}

/**
 * `hooks` that also feed the dashboard: the live page when `config.dashboard` is set, the event log when `realOut`
 * (the run's --out, as locked) is. A failed log write is a `warning` event; the run goes on.
 */
export async function withDashboard(
  config: TrainConfig,
  realOut: string | undefined,
  hooks: TrainHooks,
): Promise<RunDashboard> {
  let lastStep = 0;
  const warn = (message: string) => hooks.onEvent?.({ type: 'warning', step: lastStep, message });
  const live = new LiveFeed(new DashboardFeed(), titleOf(config));
  const log = realOut
    ? new EventLog(path.join(realOut, OUT_FILES.events), config.resume !== undefined, warn)
    : undefined;
  if (log) live.feed.subscribe(m => log.add(m));
  let server: DashboardServer | undefined;
  if (config.dashboard !== undefined) {
    const port = config.dashboard === true ? 0 : config.dashboard;
    server = await serveDashboard(live.feed, { port, host: config.dashboardHost });
    hooks.onEvent?.({ type: 'dashboard', url: server.url });
  }
  live.feed.publish({ kind: 'config', title: titleOf(config), config: jsonSafe(config) });
  return {
    hooks: teeHooks(hooks, {
      step: m => {
        lastStep = m.step;
        live.step(m);
      },
      spans: list => live.addSpans(list),
      event: e => {
        if (e.type !== 'dashboard') live.feed.publish({ kind: 'event', event: e });
      },
    }),
    finish: summary => live.finish(summary),
    fail: err => live.fail(err),
    close: async () => {
      await server?.close();
      await log?.close();
    },
  };
}
