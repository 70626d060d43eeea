/**
 * Two "hosts" on one machine: two network namespaces joined by a veth pair,
 * each end with its own address (a real TCP path through the kernel, not
 * loopback), optionally shaped with `tc tbf` on both ends' egress (a full
 * duplex link of that rate). Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) and
 * iproute2; `namespaceSupport()` says why not otherwise, so tests can skip
 * with a clear message. Used by the namespace tests and `bench -- hosts`.
 *
 *   const net = makeHostPair();
 *   net.shape('1gbit');
 *   const child = net.spawn(0, process.execPath, ['cli.js', ...]);   // host 0, listening on net.addresses[0]
 *   net.setLink(false);                                            // cut the link
 *   const s = net.addStranger();              // a third namespace that reaches host 0's address over its own veth
 *   s.spawn(process.execPath, ['stranger.js', net.addresses[0]]);
 *   net.close();
 */
import { execFileSync, spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { existsSync } from 'node:fs';

export type LinkRate = 'none' | `${number}${'kbit' | 'mbit' | 'gbit'}`;

export interface HostPair {
  /** The namespaces' names (`ip netns`), host 0 then host 1. */
  readonly names: readonly [string, string];
  /** Each host's address on the link (host 0 serves the rendezvous at addresses[0]). */
  readonly addresses: readonly [string, string];
  /** Each host's end of the veth pair (inside its namespace). */
  readonly links: readonly [string, string];
  /**
   * `command args` inside host `host`'s namespace (the returned process is the command itself: ip netns exec execs it).
   */
  spawn(host: 0 | 1, command: string, args: string[], options?: SpawnOptions): ChildProcess;
  /** Shapes both ends' egress to `rate` (tc tbf), or removes the shaping ('none'). */
  shape(rate: LinkRate): void;
  /** Sets both ends of the link up or down (down: packets stop, sockets stay open: a cut cable). */
  setLink(up: boolean): void;
  /**
   * A third namespace, a stranger to the job: joined to host 0's namespace by a veth pair of its own (another subnet)
   * with a route to host 0's address, so it reaches host 0's ports as another machine on the network would. Deleted
   * by `close`.
   */
  addStranger(): Stranger;
  /** Deletes the namespaces (and with them the veth pairs). Idempotent. */
  close(): void;
}

export interface Stranger {
  readonly name: string;
  /** Its address (host 0 sees its connections come from there). */
  readonly address: string;
  spawn(command: string, args: string[], options?: SpawnOptions): ChildProcess;
}

function run(command: string, args: string[]): string {
  return execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** Whether this process may make namespaces here; why not, when not. */
export function namespaceSupport(): { ok: true } | { ok: false; reason: string } {
  if (process.platform !== 'linux') return { ok: false, reason: 'network namespaces need Linux' };
  if (process.getuid?.() !== 0) return { ok: false, reason: 'network namespaces need root (run the tests as root)' };
  const probe = `tdprobe${process.pid}`;
  try {
    run('ip', ['netns', 'add', probe]);
    run('ip', ['netns', 'del', probe]);
    run('tc', ['-V']);
    return { ok: true };
  } catch (err) {
    return {
      ok: false,
      reason: `cannot make a network namespace with iproute2 here (${(err as Error).message.split('\n')[0]})`,
    };
  }
}

/**
 * Bytes a tbf bucket holds at `rate`: about 2 ms of traffic, at least 32 KiB (a smaller bucket caps the rate below
 * `rate`).
 */
function burstOf(rate: LinkRate): number {
  const m = /^(\d+(?:\.\d+)?)(kbit|mbit|gbit)$/.exec(rate);
  if (!m) throw new RangeError(`link rate ${rate}: expected e.g. 100mbit, 1gbit, 10gbit or none`);
  const bitsPerSecond = Number(m[1]) * { kbit: 1e3, mbit: 1e6, gbit: 1e9 }[m[2] as 'kbit' | 'mbit' | 'gbit'];
  return Math.max(32 * 1024, Math.ceil((bitsPerSecond / 8) * 0.002));
}

const open = new Set<HostPair>();
process.on('exit', () => {
  for (const pair of open) pair.close();
});

let made = 0;

/**
 * Deletes the pairs of processes that are gone (a test runner's SIGKILL leaves no chance to clean up): a pair is named
 * `td<pid><letter>h<host>`, and a pid with no /proc entry made it.
 */
function removeOrphans(): void {
  let list = '';
  try {
    list = run('ip', ['netns', 'list']);
  } catch {
    return;
  }
  for (const line of list.split('\n')) {
    const m = /^(td(\d+)[a-z](?:h[01]|s\d+))\b/.exec(line);
    if (!m || Number(m[2]) === process.pid || existsSync(`/proc/${m[2]}`)) continue;
    try {
      run('ip', ['netns', 'del', m[1]]);
    } catch {
      /* raced with its owner */
    }
  }
}

/** Two namespaces joined by a veth pair, addresses 10.213.S.1 and 10.213.S.2 (S from this process, unique per pair). */
export function makeHostPair(): HostPair {
  if (made === 0) removeOrphans();
  const tag = `${process.pid}${String.fromCharCode(97 + (made % 26))}`;
  const subnet = (process.pid * 7 + made++) % 250;
  const names = [`td${tag}h0`, `td${tag}h1`] as const;
  const links = [`tv${tag}0`, `tv${tag}1`] as const;
  const addresses = [`10.213.${subnet}.1`, `10.213.${subnet}.2`] as const;
  let closed = false;
  const strangers: string[] = [];
  const pair: HostPair = {
    names,
    addresses,
    links,
    spawn: (host, command, args, options = {}) =>
      spawn('ip', ['netns', 'exec', names[host], command, ...args], options),
    shape(rate) {
      for (const h of [0, 1] as const) {
        try {
          run('tc', ['-n', names[h], 'qdisc', 'del', 'dev', links[h], 'root']);
        } catch {
          /* none yet */
        }
        if (rate !== 'none') {
          run('tc', [
            '-n',
            names[h],
            'qdisc',
            'add',
            'dev',
            links[h],
            'root',
            'tbf',
            'rate',
            rate,
            'burst',
            String(burstOf(rate)),
            'latency',
            '50ms',
          ]);
        }
      }
    },
    setLink(up) {
      for (const h of [0, 1] as const) run('ip', ['-n', names[h], 'link', 'set', 'dev', links[h], up ? 'up' : 'down']);
    },
    addStranger: () => addStranger(names[0], addresses[0], `${tag}s${strangers.length}`, subnet, strangers),
    close() {
      if (closed) return;
      closed = true;
      open.delete(pair);
      for (const name of [...strangers, ...names]) {
        try {
          run('ip', ['netns', 'del', name]);
        } catch {
          /* already gone */
        }
      }
    },
  };
  open.add(pair);
  try {
    for (const name of names) run('ip', ['netns', 'add', name]);
    run('ip', ['link', 'add', links[0], 'type', 'veth', 'peer', 'name', links[1]]);
    for (const h of [0, 1] as const) {
      run('ip', ['link', 'set', links[h], 'netns', names[h]]);
      run('ip', ['-n', names[h], 'addr', 'add', `${addresses[h]}/24`, 'dev', links[h]]);
      run('ip', ['-n', names[h], 'link', 'set', 'lo', 'up']);
      run('ip', ['-n', names[h], 'link', 'set', links[h], 'up']);
    }
  } catch (err) {
    pair.close();
    throw err;
  }
  return pair;
}

/** A stranger's namespace `td<tag>` (listed in `made` first, to be deleted with its pair), joined to `host0`. */
function addStranger(host0: string, address0: string, tag: string, subnet: number, made: string[]): Stranger {
  const name = `td${tag}`;
  const links = [`tv${tag}a`, `tv${tag}b`] as const;
  const gateway = `10.214.${subnet}.${1 + 4 * made.length}`;
  const address = `10.214.${subnet}.${2 + 4 * made.length}`;
  made.push(name);
  run('ip', ['netns', 'add', name]);
  run('ip', ['link', 'add', links[0], 'type', 'veth', 'peer', 'name', links[1]]);
  run('ip', ['link', 'set', links[0], 'netns', host0]);
  run('ip', ['-n', host0, 'addr', 'add', `${gateway}/30`, 'dev', links[0]]);
  run('ip', ['-n', host0, 'link', 'set', links[0], 'up']);
  run('ip', ['link', 'set', links[1], 'netns', name]);
  run('ip', ['-n', name, 'addr', 'add', `${address}/30`, 'dev', links[1]]);
  run('ip', ['-n', name, 'link', 'set', 'lo', 'up']);
  run('ip', ['-n', name, 'link', 'set', links[1], 'up']);
  run('ip', ['-n', name, 'route', 'add', `${address0}/32`, 'via', gateway]);
  return {
    name,
    address,
    spawn: (command, args, options = {}) => spawn('ip', ['netns', 'exec', name, command, ...args], options),
  };
}
