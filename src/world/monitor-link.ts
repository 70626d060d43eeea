/**
 * A host other than 0: its line to host 0's monitor hub (monitor-hub.ts), a
 * TCP connection that carries its step metrics, spans and warnings. Sending
 * never waits: when host 0 reads too slowly (more than MAX_BACKLOG bytes
 * queued), span frames are dropped and counted; steps and events always go.
 * A lost connection only stops the sending: training goes on (the all-reduce
 * notices a lost host).
 */
import net from 'node:net';
import { once } from 'node:events';
import type { RunEvent } from '../monitor/run-event.js';
import type { Span } from '../monitor/span.js';
import { encodeFrame, type HostStep, type MonitorFrame } from './monitor-frames.js';
import { jobSecret, proveSecret, type MessageTags } from './job-secret.js';

/** How long host 0's hub may take to answer the handshake. */
const HANDSHAKE_MS = 10_000;

const MAX_BACKLOG = 8 << 20;
/** How long `end` waits for host 0 to take the last frames. */
const END_FLUSH_MS = 5_000;

export class MonitorLink {
  private dropped = 0;
  private readonly closed: Promise<void>;

  private constructor(
    private readonly socket: net.Socket,
    private readonly host: number,
    private readonly tags: MessageTags | undefined,
  ) {
    socket.on('error', () => {
      /* 'close' follows; monitoring is best effort */
    });
    this.closed = new Promise(resolve => socket.once('close', () => resolve()));
    this.send({ type: 'hello', host });
  }

  /** Connects to host 0's hub and proves `secret` (default this process's job secret; null: none). */
  static async connect(
    address: string,
    port: number,
    host: number,
    secret: Buffer | null = jobSecret() ?? null,
  ): Promise<MonitorLink> {
    const socket = net.connect({ host: address, port });
    await once(socket, 'connect');
    socket.setNoDelay(true);
    if (!secret) return new MonitorLink(socket, host, undefined);
    try {
      const { tags } = await proveSecret(socket, secret, 'hub', HANDSHAKE_MS);
      socket.resume(); // the hub sends nothing after the handshake
      return new MonitorLink(socket, host, tags);
    } catch (err) {
      socket.destroy();
      throw err;
    }
  }

  step(step: HostStep): void {
    this.send({ type: 'step', host: this.host, ...step });
  }
  event(event: RunEvent): void {
    this.send({ type: 'event', host: this.host, event });
  }

  spans(spans: Span[]): void {
    if (this.socket.writableLength > MAX_BACKLOG) {
      this.dropped++;
      return;
    }
    this.send({ type: 'spans', host: this.host, spans });
  }

  /** The last frame; resolves once host 0 has it (or the connection is gone, or END_FLUSH_MS passed). */
  async end(): Promise<void> {
    if (this.socket.destroyed) return;
    this.send({ type: 'end', host: this.host, dropped: this.dropped });
    this.socket.end();
    const timer = setTimeout(() => this.socket.destroy(), END_FLUSH_MS);
    try {
      await this.closed;
    } finally {
      clearTimeout(timer);
    }
  }

  close(): void {
    this.socket.destroy();
  }

  private send(frame: MonitorFrame): void {
    if (this.socket.destroyed || !this.socket.writable) return;
    const line = encodeFrame(frame);
    if (!this.tags) this.socket.write(line);
    else {
      const json = line.slice(0, -1);
      this.socket.write(`${json}\t${this.tags.seal(json).toString('hex')}\n`);
    }
  }
}
