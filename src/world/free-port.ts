/**
 * A free port for a rendezvous store that host 0 opens a moment later, once its process has started. The kernel's own
 * pick (bind to port 0) comes from the ephemeral range, which is also where every outgoing connection takes its
 * local port: in the second or so before host 0 listens, another connection on the machine could take it (it did in
 * CI: EADDRINUSE). So the port is drawn at random below that range, where only a listener can take it, and checked
 * free; the kernel's pick when none is found.
 */
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { once } from 'node:events';

/** The kernel's ephemeral port range [low, high] (Linux's default where /proc cannot tell). */
function ephemeralRange(): [number, number] {
  try {
    const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (Number.isInteger(low) && Number.isInteger(high) && low > 1024 && high >= low) return [low, high];
  } catch {
    // not Linux: its default
  }
  return [32768, 60999];
}

/** Whether a listener can open `port` on 127.0.0.1 now (it is closed again). */
async function listens(port: number): Promise<boolean> {
  const server = net.createServer();
  try {
    server.listen(port, '127.0.0.1');
    await Promise.race([once(server, 'listening'), once(server, 'error').then(([err]) => Promise.reject(err))]);
  } catch {
    return false;
  }
  server.close();
  await once(server, 'close');
  return true;
}

/** The kernel's pick of a free port on 127.0.0.1. */
async function kernelPort(): Promise<number> {
  const server = net.createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  server.close();
  await once(server, 'close');
  return port;
}

/** A port nobody listens on at 127.0.0.1 now, below the ephemeral range where it can be (host 0 listens on it soon). */
export async function freePort(): Promise<number> {
  const [low] = ephemeralRange();
  const from = Math.max(10_000, low - 12_000);
  if (low - from >= 1000)
    for (let attempt = 0; attempt < 20; attempt++) {
      const port = from + Math.floor(Math.random() * (low - from));
      if (await listens(port)) return port;
    }
  return kernelPort();
}
