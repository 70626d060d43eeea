/**
 * Host 0's monitor hub: every other host's MonitorLink connects to it (the
 * port is published in host 0's store). It merges each step's share of every
 * host into the world's step metrics — the loss averaged over every device in
 * global rank order (the bits one process with all the devices would report),
 * accuracy over the global batch, the slowest host's step time — and passes
 * on the other hosts' spans and warnings. Memory is bounded: at most
 * MAX_PENDING_STEPS steps wait for a host's share (older ones are dropped), a
 * line longer than MAX_FRAME_BYTES cuts that host off. A host that is gone is
 * never waited for: `ended` resolves when every host has sent its last frame,
 * closed its connection, or the timeout passed.
 */
import net from 'node:net';
import { once } from 'node:events';
import type { RunEvent } from '../monitor/run-event.js';
import type { Span } from '../monitor/span.js';
import { MAX_FRAME_BYTES, type HostStep, type MonitorFrame } from './monitor-frames.js';

const MAX_PENDING_STEPS = 256;

/** The world's view of one step, from every host's share. */
export interface WorldStep {
  step: number;
  losses: number[];
  correct: number;
  stepMs: number;
  computeMs: number[];
  numTensors: number[];
}

export interface HubSinks {
  step(world: WorldStep): void;
  spans(spans: Span[]): void;
  event(event: RunEvent): void;
}

export class MonitorHub {
  private readonly pending = new Map<number, (HostStep | undefined)[]>();
  private readonly done = new Set<number>();
  private readonly sockets = new Set<net.Socket>();
  private allDone?: () => void;
  /** Span frames the other hosts dropped (host 0 read too slowly), by their count at the end. */
  dropped = 0;

  private constructor(
    private readonly server: net.Server,
    private readonly hosts: number,
    private readonly sinks: HubSinks,
  ) {
    server.on('connection', socket => this.accept(socket));
  }

  /** Listens on `address` (a free port); `hosts`: the hosts of the job, host 0 included. */
  static async listen(address: string, hosts: number, sinks: HubSinks): Promise<MonitorHub> {
    const server = net.createServer();
    server.listen(0, address);
    await once(server, 'listening');
    return new MonitorHub(server, hosts, sinks);
  }

  get port(): number {
    return (this.server.address() as net.AddressInfo).port;
  }

  /** A host's share of a step (host 0's own, from its step loop; the others' from their frames). */
  share(host: number, step: HostStep): void {
    let shares = this.pending.get(step.step);
    if (!shares) {
      shares = new Array<HostStep | undefined>(this.hosts).fill(undefined);
      this.pending.set(step.step, shares);
      if (this.pending.size > MAX_PENDING_STEPS) this.pending.delete(Math.min(...this.pending.keys()));
    }
    shares[host] = step;
    if (shares.some(s => s === undefined)) return;
    this.pending.delete(step.step);
    const all = shares as HostStep[];
    this.sinks.step({
      step: step.step,
      losses: all.flatMap(s => s.losses),
      correct: all.reduce((n, s) => n + s.correct, 0),
      stepMs: Math.max(...all.map(s => s.stepMs)),
      computeMs: all.flatMap(s => s.computeMs),
      numTensors: all.flatMap(s => s.numTensors),
    });
  }

  /** Resolves when every other host has ended (its last frame, or its connection closed), or after `timeoutMs`. */
  ended(timeoutMs: number): Promise<void> {
    if (this.done.size >= this.hosts - 1) return Promise.resolve();
    return new Promise(resolve => {
      const timer = setTimeout(resolve, timeoutMs);
      timer.unref();
      this.allDone = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>(resolve => this.server.close(() => resolve()));
  }

  private accept(socket: net.Socket): void {
    this.sockets.add(socket);
    let host: number | undefined;
    let buffered = '';
    socket.setEncoding('utf8');
    socket.on('error', () => {
      /* 'close' follows */
    });
    socket.on('close', () => {
      this.sockets.delete(socket);
      if (host !== undefined) this.hostEnded(host);
    });
    socket.on('data', (chunk: string) => {
      buffered += chunk;
      if (buffered.length > MAX_FRAME_BYTES) {
        socket.destroy();
        return;
      }
      try {
        for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
          const frame = JSON.parse(buffered.slice(0, nl)) as MonitorFrame;
          buffered = buffered.slice(nl + 1);
          host = frame.host;
          this.frame(frame);
        }
      } catch {
        socket.destroy(); // not a tandem host
      }
    });
  }

  private frame(frame: MonitorFrame): void {
    switch (frame.type) {
      case 'hello':
        return;
      case 'step': {
        const { type, host, ...step } = frame;
        void type;
        this.share(host, step);
        return;
      }
      case 'spans':
        this.sinks.spans(frame.spans);
        return;
      case 'event':
        this.sinks.event(
          frame.event.type === 'failed'
            ? failedAsWarning(frame.host, frame.event)
            : { ...frame.event, host: frame.host },
        );
        return;
      case 'end':
        this.dropped += frame.dropped;
        this.hostEnded(frame.host);
        return;
      default: {
        const never: never = frame;
        throw new Error(`unknown monitor frame ${JSON.stringify(never)}`);
      }
    }
  }

  private hostEnded(host: number): void {
    this.done.add(host);
    if (this.done.size >= this.hosts - 1) this.allDone?.();
  }
}

/** Another host's failure, on host 0's stream: a warning (host 0's own `failed` is the stream's last event). */
function failedAsWarning(host: number, e: Extract<RunEvent, { type: 'failed' }>): RunEvent {
  return {
    type: 'warning',
    host,
    step: e.step ?? 0,
    message: `host ${host} failed${e.code ? ` (${e.code})` : ''}: ${e.message}`,
  };
}
