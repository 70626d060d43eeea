/**
 * An elastic run's change of membership (elastic-run.ts), agreed over host 0's store after a host was lost: every
 * survivor publishes the last step it completed under the next generation's keys; host 0 waits for each host of the
 * old world up to `waitMs` (a host that has not answered by then is taken for lost, like a stalled one), then
 * publishes the verdict: the hosts that go on (old ranks, host 0 first: the new rank is the index) and the step they go
 * on from, or why the run ends. Every survivor reads it. Host 0 alone serves the store, so a lost host 0 cannot be
 * regrouped around: the others find its store gone and end (docs/guide/elastic.md).
 */
import { TandemError } from '../errors.js';
import { StoreClient } from '../collectives/gloo/tcp-store-client.js';
import { describeProcess, type Topology } from './topology.js';

/** The key prefix of generation `generation`'s run and of the regroup that starts it. */
export function generationPrefix(generation: number): string {
  return `tandem.g${generation}.`;
}

export interface RegroupRequest {
  store: string;
  /** The world that lost a host (this host's rank and the hosts of the generation that failed). */
  topology: Topology;
  /** The generation that failed (0: the run as started); the regroup starts `generation + 1`. */
  generation: number;
  /** The last step this host's replicas completed (undefined: its state cannot be rebuilt). */
  step: number | undefined;
  minHosts: number;
  /** How long host 0 waits for a survivor's answer before taking it for lost. */
  waitMs: number;
  /** How long a survivor waits for host 0's verdict. */
  verdictWaitMs: number;
}

export type Verdict =
  { kind: 'go-on'; hosts: number[]; step: number } | { kind: 'end'; hosts: number[]; reason: string };

/** Agrees on the next generation (every survivor calls it); the verdict, the same on every survivor. */
export async function regroup(r: RegroupRequest): Promise<Verdict> {
  const { topology } = r;
  const me = topology.process;
  let client: StoreClient;
  try {
    client = await StoreClient.connect(r.store, r.verdictWaitMs, undefined, r.waitMs);
  } catch (err) {
    throw hostZeroLost(topology, `its store ${r.store} cannot be reached: ${(err as Error).message}`, err);
  }
  client.keyPrefix = `${generationPrefix(r.generation + 1)}regroup.`;
  try {
    await client.set(`alive.${me}`, JSON.stringify({ step: r.step ?? null }));
    if (me === 0) {
      const verdict = await decide(client, r);
      await client.set('verdict', JSON.stringify(verdict));
      return verdict;
    }
    return JSON.parse((await client.get('verdict', r.verdictWaitMs)).toString()) as Verdict;
  } catch (err) {
    if (err instanceof TandemError && /closed|unreachable/.test(err.message))
      throw hostZeroLost(topology, `its store closed the connection: ${err.message}`, err);
    throw err;
  } finally {
    client.close();
  }
}

/** Host 0: who answered within the wait, what they completed, and whether that is enough hosts to go on. */
async function decide(client: StoreClient, r: RegroupRequest): Promise<Verdict> {
  const deadline = Date.now() + r.waitMs;
  const steps = new Map<number, number | null>([[0, r.step ?? null]]);
  for (let h = 1; h < r.topology.processes; h++) {
    const left = Math.max(1, deadline - Date.now());
    try {
      const { step } = JSON.parse((await client.get(`alive.${h}`, left)).toString()) as { step: number | null };
      steps.set(h, step);
    } catch (err) {
      if (!(err instanceof TandemError && err.code === 'STALLED')) throw err;
      if (!client.isOpen) throw err;
    }
  }
  const hosts = [...steps.keys()].sort((a, b) => a - b);
  const name = (h: number) => describeProcess(r.topology, h);
  const lost = Array.from({ length: r.topology.processes }, (_, h) => h).filter(h => !steps.has(h));
  const lostText = lost.length > 0 ? `${lost.map(name).join(', ')} lost` : 'no host lost (a host failed)';
  if (hosts.length < r.minHosts)
    return {
      kind: 'end',
      hosts,
      reason: `${lostText}: ${hosts.length} host(s) remain, fewer than --min-hosts ` + `${r.minHosts}`,
    };
  const unknown = hosts.filter(h => steps.get(h) === null);
  if (unknown.length > 0)
    return {
      kind: 'end',
      hosts,
      reason: `${lostText}, and ${unknown.map(name).join(', ')} cannot rebuild the state of a completed step`,
    };
  const completed = hosts.map(h => steps.get(h)!);
  const step = Math.min(...completed);
  if (completed.some(s => s !== step))
    return {
      kind: 'end',
      hosts,
      reason:
        `${lostText}; the survivors completed different steps ` +
        `(${hosts.map((h, i) => `${name(h)}: ${completed[i]}`).join(', ')}) ` +
        `and a host cannot roll back an applied update yet`,
    };
  return { kind: 'go-on', hosts, step };
}

function hostZeroLost(topology: Topology, why: string, cause: unknown): TandemError {
  return new TandemError(
    'PEER_LOST',
    `${describeProcess(topology, 0)}, which serves the rendezvous store, was lost (${why}): an elastic run goes on ` +
      `without any host but host 0; restart the job from its last checkpoint`,
    undefined,
    { cause },
  );
}
