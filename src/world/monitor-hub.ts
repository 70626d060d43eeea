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
 * Trust (docs/guide/security.md): a connection is served only once it proved
 * the job secret (job-secret.ts), and each line carries its tag; its first
 * frame (`hello`) binds it to a host no other connection holds, and every
 * later frame counts for that host whatever it claims. A frame that is not
 * right (checkFrame) drops its connection, logged naming the peer; the run
 * goes on.
 */
import net from 'node:net';
import { once } from 'node:events';
import type { RunEvent } from '../monitor/run-event.js';
import type { Span } from '../monitor/span.js';
import { checkFrame, MAX_FRAME_BYTES, type HostStep, type MonitorFrame } from './monitor-frames.js';
import { admitClient, AuthRefused, jobSecret, TAG_BYTES, type MessageTags } from './job-secret.js';
import { ChunkQueue } from '../collectives/gloo/chunk-queue.js';

const MAX_PENDING_STEPS = 256;
/** How long a host may take to prove the job secret before it is dropped. */
const HANDSHAKE_MS = 10_000;

export interface HubOptions {
  /** The job secret every host proves (default this process's, job-secret.ts; null: none, `--insecure`). */
  secret?: Buffer | null;
  /** Where a refused or dropped peer is reported, naming its address (default: stderr). */
  log?: (line: string) => void;
}

/** The world's view of one step, from every host's share. */
export interface WorldStep {
  step: number;
  losses: number[];
  correct: number;
  stepMs: number;
  computeMs: number[];
  numTensors: number[];
  /** The longest any host's step loop waited for inputs in the step. */
  dataWaitMs: number;
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

  /** The hosts a connection is bound to. */
  private readonly bound = new Set<number>();
  private readonly secret?: Buffer;
  private readonly log: (line: string) => void;

  private constructor(
    private readonly server: net.Server,
    private readonly hosts: number,
    private readonly sinks: HubSinks,
    options: HubOptions,
  ) {
    this.secret = options.secret === null ? undefined : (options.secret ?? jobSecret());
    this.log = options.log ?? ((line: string) => process.stderr.write(`tandem: ${line}\n`));
    server.on('connection', socket => this.accept(socket));
  }

  /** Listens on `address` (a free port); `hosts`: the hosts of the job, host 0 included. */
  static async listen(address: string, hosts: number, sinks: HubSinks, options: HubOptions = {}): Promise<MonitorHub> {
    const server = net.createServer();
    server.listen(0, address);
    await once(server, 'listening');
    return new MonitorHub(server, hosts, sinks, options);
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
      dataWaitMs: Math.max(...all.map(s => s.dataWaitMs)),
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
    const peer = `${socket.remoteAddress}:${socket.remotePort}`;
    socket.on('error', () => {
      /* 'close' follows */
    });
    socket.on('close', () => this.sockets.delete(socket));
    if (!this.secret) {
      this.serve(socket, peer, undefined, Buffer.alloc(0));
      return;
    }
    admitClient(socket, this.secret, 'hub', HANDSHAKE_MS).then(
      ({ tags, rest }) => this.serve(socket, peer, tags, rest),
      (err: unknown) => {
        if (!(err instanceof AuthRefused) || socket.bytesRead > 0)
          this.log(`the monitor hub refused ${peer}: it ${(err as Error).message}`);
        socket.destroy();
      },
    );
  }

  /** Reads one admitted connection's lines (each `<json>` or, with a secret, `<json>\t<tag>`) until it closes. */
  private serve(socket: net.Socket, peer: string, tags: MessageTags | undefined, rest: Buffer): void {
    const queue = new ChunkQueue();
    let searched = 0;
    let host: number | undefined;
    socket.on('close', () => {
      if (host === undefined) return;
      this.bound.delete(host);
      this.hostEnded(host);
    });
    const onData = (chunk: Buffer) => {
      queue.push(chunk);
      try {
        for (;;) {
          const nl = queue.indexOf(10, MAX_FRAME_BYTES + 1, searched);
          if (nl < 0) {
            if (queue.length > MAX_FRAME_BYTES) throw new Error(`a line over the bound of ${MAX_FRAME_BYTES} bytes`);
            searched = queue.length;
            return;
          }
          searched = 0;
          const frame = checkFrame(JSON.parse(openLine(queue.take(nl + 1).subarray(0, nl), tags)));
          host = this.bind(host, frame);
          this.frame({ ...frame, host } as MonitorFrame);
        }
      } catch (err) {
        this.log(
          `the monitor hub dropped ${peer}${host === undefined ? '' : ` (host ${host})`}: ${(err as Error).message}`,
        );
        socket.destroy();
      }
    };
    socket.on('data', onData);
    if (rest.length > 0) onData(rest);
    socket.resume();
  }

  /** The host a connection's frame counts for: bound by its first frame (`hello`), never taken from a later one. */
  private bind(host: number | undefined, frame: MonitorFrame): number {
    if (host !== undefined) {
      if (frame.type === 'hello' || frame.host !== host)
        throw new Error(`a frame claiming host ${frame.host} on host ${host}'s connection`);
      return host;
    }
    if (frame.type !== 'hello') throw new Error(`a '${frame.type}' frame before its hello`);
    if (frame.host < 1 || frame.host >= this.hosts)
      throw new Error(`a hello from host ${frame.host}, not another host of this job (1..${this.hosts - 1})`);
    if (this.bound.has(frame.host) || this.done.has(frame.host))
      throw new Error(`a second connection claiming host ${frame.host}`);
    this.bound.add(frame.host);
    return frame.host;
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

/** A line's JSON: with a secret, the line is `<json>\t<tag hex>` and the tag must be the sender's next. */
function openLine(line: Buffer, tags: MessageTags | undefined): string {
  if (!tags) return line.toString('utf8');
  const tab = line.lastIndexOf(9);
  const tag = tab < 0 ? Buffer.alloc(0) : Buffer.from(line.subarray(tab + 1).toString('latin1'), 'hex');
  if (tag.length !== TAG_BYTES || !tags.open(tag, line.subarray(0, tab)))
    throw new Error('a line whose tag does not match (changed, replayed or not from a job host)');
  return line.subarray(0, tab).toString('utf8');
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
