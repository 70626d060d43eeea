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
import { encodeReply, parseRequest, type StoreReply, type StoreRequest } from './store-protocol.js';

export interface StoreServerOptions {
  /** Address to listen on (default 127.0.0.1; 0.0.0.0 for other hosts). */
  host?: string;
  /** Port (default 0: any free port, see `port`). */
  port?: number;
  /**
   * Close by itself once this many clients have connected and all have disconnected (a communicator's ranks after
   * rendezvous).
   */
  closeAfterClients?: number;
}

export interface StoreServer {
  /** `tcp://host:port`, as GlooContextOptions.store takes it. */
  readonly url: string;
  readonly port: number;
  /** Resolves when the server has closed (by `close()` or after `closeAfterClients`). */
  readonly closed: Promise<void>;
  close(): Promise<void>;
}

class KeyValues {
  private readonly values = new Map<string, Buffer>();
  private readonly waiters = new Map<string, Set<() => void>>();

  set(key: string, value: Buffer): void {
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
      case 'ADD':
        return { ok: true, value: this.add(req.key, BigInt(req.value.toString('latin1') || '0')) };
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

/** Serves one connection: requests answered one at a time, in order. */
function serve(socket: net.Socket, store: KeyValues): void {
  let pending = Buffer.alloc(0);
  let busy = false;
  const cancel = new Set<() => void>();
  const pump = async (): Promise<void> => {
    if (busy) return;
    busy = true;
    try {
      for (let parsed = parseRequest(pending); parsed; parsed = parseRequest(pending)) {
        pending = pending.subarray(parsed.used);
        const reply = await store.answer(parsed.message, cancel);
        if (socket.destroyed) return;
        socket.write(encodeReply(reply));
      }
    } catch {
      socket.destroy();
    } finally {
      busy = false;
    }
  };
  socket.setNoDelay(true);
  socket.on('data', chunk => {
    pending = Buffer.concat([pending, chunk]);
    void pump();
  });
  socket.on('error', () => socket.destroy());
  socket.on('close', () => [...cancel].forEach(stop => stop()));
}

export async function startStoreServer(options: StoreServerOptions = {}): Promise<StoreServer> {
  const host = options.host ?? '127.0.0.1';
  const store = new KeyValues();
  const sockets = new Set<net.Socket>();
  let seen = 0;
  const server = net.createServer(socket => {
    seen++;
    sockets.add(socket);
    socket.on('close', () => {
      sockets.delete(socket);
      if (options.closeAfterClients !== undefined && seen >= options.closeAfterClients && sockets.size === 0)
        server.close();
    });
    serve(socket, store);
  });
  const closed = new Promise<void>(resolve => server.once('close', () => resolve()));
  server.listen(options.port ?? 0, host);
  try {
    await once(server, 'listening'); // rejects on 'error'
  } catch (err) {
    throw new TandemError(
      'BAD_CONFIG',
      `the rendezvous store cannot listen on ${host}:${options.port ?? 0}: ${(err as Error).message}`,
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
    close: async () => {
      sockets.forEach(s => s.destroy());
      if (server.listening) server.close();
      await closed;
    },
  };
}
