/**
 * An asynchronous client of tandem's rendezvous store (store-protocol.ts), for
 * code on an event loop (a launcher, the tests). The ranks' Gloo rendezvous
 * uses the addon's synchronous C++ client instead.
 */
import net from 'node:net';
import { once } from 'node:events';
import { TandemError } from '../../errors.js';
import {
  encodeRequest,
  MAX_HEADER_BYTES,
  parseReplyHeader,
  STORE_LIMITS,
  type StoreCommand,
  type StoreReply,
} from './store-protocol.js';
import { FrameReader } from './chunk-queue.js';
import { jobSecret, proveSecret, SECRET_ENV, type MessageTags } from '../../world/job-secret.js';

/** How long host 0's store may take to answer the handshake. */
const HANDSHAKE_MS = 10_000;

export class StoreClient {
  /** Put before every key this client names (an elastic run's generation: world/regroup.ts); empty: none. */
  keyPrefix = '';
  private readonly reader: FrameReader<{ ok: boolean; bodyBytes: number }>;
  private readonly replies: { resolve: (r: StoreReply) => void; reject: (e: Error) => void }[] = [];

  private constructor(
    private readonly socket: net.Socket,
    readonly url: string,
    private readonly timeoutMs: number,
    private readonly tags: MessageTags | undefined,
  ) {
    this.reader = new FrameReader(line => parseReplyHeader(line, STORE_LIMITS.maxValueBytes), MAX_HEADER_BYTES, tags);
    socket.setNoDelay(true);
    socket.on('data', chunk => this.received(chunk));
    socket.on('close', () => this.failAll(new TandemError('STALLED', `rendezvous store ${url} closed the connection`)));
    socket.on('error', () => {
      /* 'close' follows */
    });
  }

  /**
   * Connects to `tcp://host:port` and proves `secret` (default this process's job secret; null: none); requests wait
   * at most `timeoutMs` for a key; the connection itself at most `connectTimeoutMs` (absent: the kernel's limit).
   */
  static async connect(
    url: string,
    timeoutMs: number,
    secret: Buffer | null = jobSecret() ?? null,
    connectTimeoutMs?: number,
  ): Promise<StoreClient> {
    const { host, port } = parseStoreUrl(url);
    const socket = net.connect({ host, port });
    // a cut link answers no SYN: the kernel's own limit is minutes
    const timer =
      connectTimeoutMs === undefined
        ? undefined
        : setTimeout(() => socket.destroy(new Error(`no answer within ${connectTimeoutMs} ms`)), connectTimeoutMs);
    try {
      await once(socket, 'connect'); // rejects on 'error'
    } catch (err) {
      socket.destroy();
      throw new TandemError('STALLED', `rendezvous store ${url} unreachable: ${(err as Error).message}`, undefined, {
        cause: err,
      });
    } finally {
      clearTimeout(timer);
    }
    if (!secret) return new StoreClient(socket, url, timeoutMs, undefined);
    try {
      const { tags, rest } = await proveSecret(socket, secret, 'store', HANDSHAKE_MS);
      const client = new StoreClient(socket, url, timeoutMs, tags);
      client.received(rest);
      socket.resume();
      return client;
    } catch (err) {
      socket.destroy();
      throw new TandemError(
        'BAD_CONFIG',
        `rendezvous store ${url}: ${(err as Error).message} (the job secret: ${SECRET_ENV} or --job-secret-file)`,
        undefined,
        { cause: err },
      );
    }
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
    const request = encodeRequest({ command, timeoutMs, key: this.keyPrefix + key, value });
    this.socket.write(this.tags ? Buffer.concat([request, this.tags.seal(request)]) : request);
    const r = await reply;
    if (!r.ok) throw new TandemError('STALLED', `rendezvous store ${this.url}: ${r.message}`);
    return r.value;
  }

  private received(chunk: Buffer): void {
    this.reader.push(chunk);
    try {
      for (let f = this.reader.next(); f; f = this.reader.next()) {
        const reply: StoreReply = f.header.ok
          ? { ok: true, value: f.body }
          : { ok: false, message: f.body.toString('utf8') };
        this.replies.shift()?.resolve(reply);
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
