/**
 * tandem's rendezvous store, served by rank 0's process (as PyTorch's c10d
 * TCPStore, torchrun's `--rdzv-endpoint`): set/get/wait/add over TCP in the
 * format of store-protocol.ts. It runs on an event loop that never blocks in a
 * collective (the main thread), never on a rank's thread: the ranks' Gloo
 * rendezvous waits on it synchronously.
 */
import net from 'node:net';
import { once } from 'node:events';
import { TandemError } from '../../errors.js';
import {
  encodeReply,
  FrameRefused,
  MAX_HEADER_BYTES,
  parseRequestHeader,
  STORE_LIMITS,
  type RequestHeader,
  type StoreLimits,
  type StoreReply,
  type StoreRequest,
} from './store-protocol.js';
import { FrameReader } from './chunk-queue.js';
import { admitClient, AuthRefused, jobSecret, type MessageTags } from '../../world/job-secret.js';

/** How long a client may take to prove the job secret before it is dropped. */
const HANDSHAKE_MS = 10_000;

export interface StoreServerOptions {
  /** Address to listen on (default 127.0.0.1; 0.0.0.0 for other hosts). */
  host?: string;
  /** Port (default 0: any free port, see `port`). */
  port?: number;
  /**
   * Close by itself once this many clients have been admitted and all have disconnected (a communicator's ranks after
   * rendezvous; a refused stranger does not count).
   */
  closeAfterClients?: number;
  /**
   * The secret a client must prove before any request (job-secret.ts); default this process's (TANDEM_JOB_SECRET),
   * none: every client is served (`--insecure`). One process's gloo communicator gives its store a secret of its own.
   */
  secret?: Buffer | null;
  /** Where a refused client is reported, naming its address (default: stderr). */
  log?: (line: string) => void;
  limits?: StoreLimits;
}

export interface StoreServer {
  /** `tcp://host:port`, as GlooContextOptions.store takes it. */
  readonly url: string;
  readonly port: number;
  /** Resolves when the server has closed (by `close()` or after `closeAfterClients`). */
  readonly closed: Promise<void>;
  close(): Promise<void>;
  /**
   * When (performance.now(), this process's clock) the connection that set `presenceKey` last sent anything;
   * undefined when no connection set it.
   */
  lastHeard(presenceKey: string): number | undefined;
}

/**
 * A key set with this suffix marks its connection's presence: when the connection closes (the process ended, or closed
 * it), the store sets `goneKey(key)`, so that a waiter learns at once that a process died (world/regroup.ts). A cut
 * link closes nothing: its waiter waits out its timeout.
 */
export const PRESENCE_SUFFIX = '.presence';
export const goneKey = (presenceKey: string): string => `${presenceKey}.gone`;

class KeyValues {
  private readonly values = new Map<string, Buffer>();
  /** Per presence key: when its connection last sent a byte (a heartbeat: world/regroup.ts). */
  readonly heard = new Map<string, number>();
  private readonly waiters = new Map<string, Set<() => void>>();

  constructor(private readonly maxKeys: number) {}

  set(key: string, value: Buffer): void {
    if (this.values.size >= this.maxKeys && !this.values.has(key))
      throw new FrameRefused(`a SET of a new key past the bound of ${this.maxKeys} keys`);
    this.values.set(key, value);
    const waiting = this.waiters.get(key);
    this.waiters.delete(key);
    waiting?.forEach(wake => wake());
  }

  add(key: string, delta: bigint): Buffer {
    const next = Buffer.from(String(BigInt(this.values.get(key)?.toString('latin1') || '0') + delta), 'latin1');
    this.set(key, next);
    return next;
  }

  /** The key's value once set; undefined after `timeoutMs` or when `cancel` fires. */
  async when(key: string, timeoutMs: number, cancel: Set<() => void>): Promise<Buffer | undefined> {
    if (this.values.has(key)) return this.values.get(key);
    await new Promise<void>(resolve => {
      const waiting = this.waiters.get(key) ?? new Set<() => void>();
      this.waiters.set(key, waiting);
      const done = () => {
        clearTimeout(timer);
        waiting.delete(done);
        cancel.delete(done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      waiting.add(done);
      cancel.add(done);
    });
    return this.values.get(key);
  }

  async answer(req: StoreRequest, cancel: Set<() => void>): Promise<StoreReply> {
    switch (req.command) {
      case 'SET':
        this.set(req.key, req.value);
        return { ok: true, value: Buffer.alloc(0) };
      case 'ADD': {
        const delta = req.value.toString('latin1') || '0';
        if (!/^-?\d{1,19}$/.test(delta)) throw new FrameRefused(`an ADD of ${JSON.stringify(delta.slice(0, 24))}`);
        return { ok: true, value: this.add(req.key, BigInt(delta)) };
      }
      case 'GET':
      case 'WAIT': {
        const value = await this.when(req.key, req.timeoutMs, cancel);
        if (value === undefined)
          return { ok: false, message: `key '${req.key}' was not set within ${req.timeoutMs} ms` };
        return { ok: true, value: req.command === 'GET' ? value : Buffer.alloc(0) };
      }
      default: {
        const never: never = req.command;
        throw new Error(`unknown store command ${String(never)}`);
      }
    }
  }
}

/** One client's connection: who it is, what it may send, the tags of its messages when the job has a secret. */
interface Connection {
  socket: net.Socket;
  peer: string;
  log: (line: string) => void;
  limits: StoreLimits;
  tags?: MessageTags;
}

/** Serves one connection: requests answered one at a time, in order; a refused frame ends it, logged. */
function serve(c: Connection, store: KeyValues, rest: Buffer): void {
  const { socket } = c;
  const reader = new FrameReader<RequestHeader & { bodyBytes: number }>(
    line => {
      const h = parseRequestHeader(line, c.limits);
      return { ...h, bodyBytes: h.keyBytes + h.valueBytes };
    },
    MAX_HEADER_BYTES,
    c.tags,
  );
  let busy = false;
  const cancel = new Set<() => void>();
  /** Presence keys this connection set (PRESENCE_SUFFIX): marked gone when it closes. */
  const present = new Set<string>();
  const drop = (err: unknown) => {
    c.log(`the rendezvous store dropped ${c.peer}: ${(err as Error).message}`);
    socket.destroy();
  };
  const pump = async (): Promise<void> => {
    if (busy) return;
    busy = true;
    try {
      for (let f = reader.next(); f; f = reader.next()) {
        const { header: h, body } = f;
        const req = { ...h, key: body.subarray(0, h.keyBytes).toString('utf8'), value: body.subarray(h.keyBytes) };
        const reply = encodeReply(await store.answer(req, cancel));
        if (req.command === 'SET' && req.key.endsWith(PRESENCE_SUFFIX)) {
          present.add(req.key);
          store.heard.set(req.key, performance.now());
        }
        if (socket.destroyed) return;
        socket.write(c.tags ? Buffer.concat([reply, c.tags.seal(reply)]) : reply);
      }
    } catch (err) {
      drop(err);
    } finally {
      busy = false;
    }
  };
  socket.on('data', (chunk: Buffer) => {
    const now = performance.now();
    for (const key of present) store.heard.set(key, now);
    reader.push(chunk);
    void pump();
  });
  socket.on('close', () => {
    [...cancel].forEach(stop => stop());
    try {
      for (const key of present) store.set(goneKey(key), Buffer.alloc(0));
    } catch {
      /* past the bound of keys: a waiter waits out its timeout */
    }
  });
  reader.push(rest);
  socket.resume();
  void pump();
}

/**
 * Admits a client (proving the secret when there is one), then serves it; a refusal is logged naming the client.
 * `admitted` is called once the client is in.
 */
function accept(
  socket: net.Socket,
  store: KeyValues,
  options: StoreServerOptions,
  secret: Buffer | undefined,
  admitted: () => void,
): void {
  const peer = `${socket.remoteAddress}:${socket.remotePort}`;
  const log = options.log ?? ((line: string) => process.stderr.write(`tandem: ${line}\n`));
  const limits = options.limits ?? STORE_LIMITS;
  socket.setNoDelay(true);
  socket.on('error', () => socket.destroy());
  if (!secret) {
    admitted();
    serve({ socket, peer, log, limits }, store, Buffer.alloc(0));
    return;
  }
  admitClient(socket, secret, 'store', HANDSHAKE_MS).then(
    ({ tags, rest }) => {
      admitted();
      serve({ socket, peer, log, limits, tags }, store, rest);
    },
    (err: unknown) => {
      // A connection that closes before sending a byte is a probe (addressTowards): not worth a line.
      if (!(err instanceof AuthRefused) || socket.bytesRead > 0)
        log(`the rendezvous store refused ${peer}: it ${(err as Error).message}`);
      socket.destroy();
    },
  );
}

export async function startStoreServer(options: StoreServerOptions = {}): Promise<StoreServer> {
  const host = options.host ?? '127.0.0.1';
  const limits = options.limits ?? STORE_LIMITS;
  const store = new KeyValues(limits.maxKeys);
  const secret = options.secret === null ? undefined : (options.secret ?? jobSecret());
  const sockets = new Set<net.Socket>();
  let admitted = 0; // a stranger refused, or a probe, is not one of the clients that close the server
  const server = net.createServer(socket => {
    sockets.add(socket);
    socket.on('close', () => {
      sockets.delete(socket);
      if (options.closeAfterClients !== undefined && admitted >= options.closeAfterClients && sockets.size === 0)
        server.close();
    });
    accept(socket, store, options, secret, () => admitted++);
  });
  const closed = new Promise<void>(resolve => server.once('close', () => resolve()));
  server.listen(options.port ?? 0, host);
  try {
    await once(server, 'listening'); // rejects on 'error'
  } catch (err) {
    throw new TandemError(
      'BAD_CONFIG',
      `the rendezvous store cannot listen on ${host}:${options.port ?? 0}: ${(err as Error).message}` +
        listenHint((err as NodeJS.ErrnoException).code),
      undefined,
      { cause: err },
    );
  }
  server.unref(); // a store never keeps a process alive by itself
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `tcp://${host.includes(':') ? `[${host}]` : host}:${port}`,
    port,
    closed,
    lastHeard: key => store.heard.get(key),
    close: async () => {
      sockets.forEach(s => s.destroy());
      if (server.listening) server.close();
      await closed;
    },
  };
}

/** What to do when host 0 cannot listen at the rendezvous. */
function listenHint(code: string | undefined): string {
  if (code === 'EADDRINUSE')
    return ' (another process holds the port: another job, or a run still ending; give every host another port)';
  if (code === 'EADDRNOTAVAIL')
    return " (no interface of this host has that address: the rendezvous names host 0's own address)";
  return '';
}
