/**
 * An asynchronous client of tandem's rendezvous store (store-protocol.ts), for
 * code on an event loop (a launcher, the tests). The ranks' Gloo rendezvous
 * uses the addon's synchronous C++ client instead.
 */
import net from 'node:net';
import { once } from 'node:events';
import { TandemError } from '../../errors.js';
import { encodeRequest, parseReply, type StoreCommand, type StoreReply } from './store-protocol.js';

export class StoreClient {
  private pending = Buffer.alloc(0);
  private readonly replies: { resolve: (r: StoreReply) => void; reject: (e: Error) => void }[] = [];

  private constructor(
    private readonly socket: net.Socket,
    readonly url: string,
    private readonly timeoutMs: number,
  ) {
    socket.setNoDelay(true);
    socket.on('data', chunk => this.received(chunk));
    socket.on('close', () => this.failAll(new TandemError('STALLED', `rendezvous store ${url} closed the connection`)));
    socket.on('error', () => {
      /* 'close' follows */
    });
  }

  /** Connects to `tcp://host:port`; requests wait at most `timeoutMs` for a key. */
  static async connect(url: string, timeoutMs: number): Promise<StoreClient> {
    const { host, port } = parseStoreUrl(url);
    const socket = net.connect({ host, port });
    try {
      await once(socket, 'connect'); // rejects on 'error'
    } catch (err) {
      socket.destroy();
      throw new TandemError('STALLED', `rendezvous store ${url} unreachable: ${(err as Error).message}`, undefined, {
        cause: err,
      });
    }
    return new StoreClient(socket, url, timeoutMs);
  }

  async set(key: string, value: Buffer | string): Promise<void> {
    await this.request('SET', key, Buffer.from(value));
  }
  /** `timeoutMs`: this request's wait for the key, instead of the client's (0: answered at once). */
  async get(key: string, timeoutMs = this.timeoutMs): Promise<Buffer> {
    return this.request('GET', key, Buffer.alloc(0), timeoutMs);
  }
  async wait(keys: string[]): Promise<void> {
    for (const key of keys) await this.request('WAIT', key, Buffer.alloc(0));
  }
  async add(key: string, delta: number): Promise<number> {
    return Number((await this.request('ADD', key, Buffer.from(String(delta)))).toString());
  }

  /** False once the connection closed (the store went away, or `close()`). */
  get isOpen(): boolean {
    return !this.socket.destroyed;
  }

  close(): void {
    this.socket.destroy();
  }

  private async request(
    command: StoreCommand,
    key: string,
    value: Buffer,
    timeoutMs = this.timeoutMs,
  ): Promise<Buffer> {
    if (this.socket.destroyed)
      throw new TandemError('STALLED', `rendezvous store ${this.url}: the connection is closed`);
    const reply = new Promise<StoreReply>((resolve, reject) => this.replies.push({ resolve, reject }));
    this.socket.write(encodeRequest({ command, timeoutMs, key, value }));
    const r = await reply;
    if (!r.ok) throw new TandemError('STALLED', `rendezvous store ${this.url}: ${r.message}`);
    return r.value;
  }

  private received(chunk: Buffer): void {
    this.pending = Buffer.concat([this.pending, chunk]);
    try {
      for (let parsed = parseReply(this.pending); parsed; parsed = parseReply(this.pending)) {
        this.pending = this.pending.subarray(parsed.used);
        this.replies.shift()?.resolve(parsed.message);
      }
    } catch (err) {
      this.socket.destroy(err as Error);
    }
  }

  private failAll(err: Error): void {
    for (const r of this.replies.splice(0)) r.reject(err);
  }
}

/** host and port of `tcp://host:port` (`[v6]` hosts too); BAD_CONFIG otherwise. */
export function parseStoreUrl(url: string): { host: string; port: number } {
  const m = /^tcp:\/\/(\[[^\]]+\]|[^:/]+):(\d+)$/.exec(url);
  if (!m) throw new TandemError('BAD_CONFIG', `store '${url}' is not tcp://host:port`);
  return { host: m[1].replace(/^\[|\]$/g, ''), port: Number(m[2]) };
}
