// freePort (tandem launch's rendezvous port, taken by host 0 a moment later): below the kernel's ephemeral range, where
// no outgoing connection takes its local port in between (an ephemeral pick was taken in CI: EADDRINUSE), and free.
import t from 'tap';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { once } from 'node:events';
import { freePort } from '../src/world/launch.js';

t.test('a free port below the ephemeral range, which a listener then opens', async t => {
  const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
  for (let i = 0; i < 5; i++) {
    const port = await freePort();
    t.ok(port >= 1024 && port < low, `port ${port} is below the ephemeral range's ${low}`);
    const server = net.createServer();
    server.listen(port, '127.0.0.1');
    await once(server, 'listening');
    server.close();
    await once(server, 'close');
  }
});
