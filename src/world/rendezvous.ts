/**
 * The rendezvous of a job of several hosts: `HOST:PORT`, where host 0 serves
 * the store (tcp-store-server.ts) every rank of every host meets at, as
 * torchrun's `--rdzv-endpoint`. A host listens for its peers on the address
 * it reaches the rendezvous from (so one flag names the network to use).
 */
import net from 'node:net';
import { once } from 'node:events';
import { TandemError } from '../errors.js';
import { startStoreServer, type StoreServer } from '../collectives/gloo/tcp-store-server.js';

export interface Rendezvous {
  host: string;
  port: number;
  /**
   * Put before every key this run writes in the store (communicators, the host channel): an elastic run's generation
   * after a membership change (`tandem.g1.`), so that its keys never meet the previous generation's. Absent: none.
   */
  prefix?: string;
}

/** `HOST:PORT` or `[IPV6]:PORT`; BAD_CONFIG naming the field otherwise. */
export function parseRendezvous(field: string, text: string): Rendezvous {
  const m = /^(?:\[([^\]]+)\]|([^:\s]+)):(\d{1,5})$/.exec(text);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port < 1 || port > 65535) {
    throw new TandemError(
      'BAD_CONFIG',
      `config.${field}: expected HOST:PORT (host 0's address and a free port, e.g. 10.0.0.1:29500), got ` +
        `${JSON.stringify(text)}`,
    );
  }
  return { host: m[1] ?? m[2], port };
}

export function storeUrl(r: Rendezvous): string {
  return `tcp://${r.host.includes(':') ? `[${r.host}]` : r.host}:${r.port}`;
}

/** Host 0: the store at the rendezvous address, until `close()`. */
export function serveRendezvous(r: Rendezvous): Promise<StoreServer> {
  return startStoreServer({ host: r.host, port: r.port });
}

/** The local address this host reaches the rendezvous from (waits for host 0 to listen, up to `timeoutMs`). */
export async function addressTowards(r: Rendezvous, timeoutMs: number): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (let wait = 20; ; wait = Math.min(500, wait * 2)) {
    const socket = net.connect({ host: r.host, port: r.port });
    try {
      await once(socket, 'connect');
      return socket.localAddress ?? r.host;
    } catch (err) {
      if (Date.now() + wait > deadline) {
        throw new TandemError(
          'STALLED',
          `host 0's rendezvous at ${r.host}:${r.port} did not answer within ${(timeoutMs / 1000).toFixed(1)} s: ` +
            `${(err as Error).message} (is host 0 started, and the port open?)`,
          undefined,
          { cause: err },
        );
      }
      await new Promise(resolve => setTimeout(resolve, wait));
    } finally {
      socket.destroy();
    }
  }
}
