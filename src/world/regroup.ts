/**
 * An elastic run's change of membership (elastic-run.ts), agreed over host 0's store after a host was lost: every
 * survivor publishes the last step it completed under the next generation's keys; host 0 waits for each host of the
 * old world, then publishes the verdict: the hosts that go on (old ranks, host 0 first: the new rank is the index) and
 * the step they go on from, or why the run ends. Every survivor reads it.
 *
 * Slow or dead: each host other than 0 holds a presence connection to the store through its generation
 * (`openPresence`); when its process dies the connection closes and the store marks it gone, so host 0 drops it at
 * once. The connection also beats (a small request a few times a stall timeout), and the store notes when it last
 * heard from each host: a host whose connection stays open (a slow host: a long step, a checkpoint being written, a
 * pause) is waited for until it has been silent for `waitMs` (the peer wait, as a Gloo call waits for a silent peer),
 * counted from then; only then is it dropped (a cut link — silent since the cut, through the failed call's own peer
 * wait, so dropped at once — or a host frozen for good). Host 0 alone serves the store, so a lost host 0 cannot be
 * regrouped around: the others find its store gone and end (docs/guide/elastic.md).
 */
import { TandemError } from '../errors.js';
import { StoreClient } from '../collectives/gloo/tcp-store-client.js';
import { goneKey, PRESENCE_SUFFIX } from '../collectives/gloo/tcp-store-server.js';
import { addressTowards, storeUrl, type Rendezvous } from './rendezvous.js';
import { describeProcess, type Topology } from './topology.js';

/** The key prefix of generation `generation`'s run and of the regroup that starts it. */
export function generationPrefix(generation: number): string {
  return `tandem.g${generation}.`;
}

/** A host waiting to be admitted (join-requests.ts): its ticket, and the rank it was started with (`--host-rank`). */
export interface JoinRequest {
  ticket: number;
  rank: number;
}

export interface RegroupRequest {
  store: string;
  /** The world that lost a host (this host's rank and the hosts of the generation that failed). */
  topology: Topology;
  /** The generation that failed (0: the run as started); the regroup starts `generation + 1`. */
  generation: number;
  /** The last step this host's replicas completed (undefined: its state cannot be rebuilt). */
  step: number | undefined;
  /** The oldest step it can go back to (`step`, or the one before when its pre-update copy holds every group). */
  oldest?: number;
  minHosts: number;
  /** The most hosts the run may have (--hosts). */
  maxHosts: number;
  /** Host 0: the hosts waiting to be admitted (join-requests.ts), in the order they asked. */
  joining?: readonly JoinRequest[];
  /**
   * Host 0: when (performance.now()) host `h` of the failed generation was last heard from (its presence connection's
   * heartbeat); a host is waited for until it has been silent for `waitMs`, counted from then.
   */
  lastHeard?: (h: number) => number | undefined;
  /** How long host 0 waits for a survivor's answer before taking it for lost. */
  waitMs: number;
  /** How long a survivor waits for host 0's verdict. */
  verdictWaitMs: number;
}

/**
 * go-on: `hosts` (old ranks, host 0 first) go on from `step`, and `joined` (waiting hosts admitted) after them, in
 * that order.
 */
export type Verdict =
  | { kind: 'go-on'; hosts: number[]; step: number; joined: JoinRequest[] }
  | { kind: 'end'; hosts: number[]; reason: string };

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
  client.keyPrefix = regroupPrefix(r.generation);
  try {
    await client.set(`alive.${me}`, JSON.stringify({ step: r.step ?? null, oldest: r.oldest ?? r.step ?? null }));
    if (me === 0) {
      const verdict = await decide(r);
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
async function decide(r: RegroupRequest): Promise<Verdict> {
  const answers = await Promise.all(Array.from({ length: r.topology.processes - 1 }, (_, k) => answerOf(r, k + 1)));
  const mine = r.step === undefined ? null : completedOf({ step: r.step, oldest: r.oldest });
  const steps = new Map<number, Completed | null>([[0, mine]]);
  for (const a of answers) if (a.kind === 'alive') steps.set(a.host, a.completed);
  return verdictOf(r, steps);
}

/** A survivor's newest completed step, and the oldest it can roll back to. */
type Completed = { step: number; oldest: number };

const completedOf = (r: { step: number; oldest?: number }): Completed => ({ step: r.step, oldest: r.oldest ?? r.step });

type Answer = { kind: 'alive'; host: number; completed: Completed | null } | { kind: 'lost'; host: number };

/**
 * Host `h`'s answer: the step it completed, or lost — at once when its presence connection closed (its process ended),
 * else once `waitMs` passed without a word (a cut link, a host frozen for good). A slow host that answers within the
 * wait stays.
 */
async function answerOf(r: RegroupRequest, h: number): Promise<Answer> {
  const lost: Answer = { kind: 'lost', host: h };
  // silent since it was last heard from (its heartbeat), not since now: a cut link was silent through the failed call
  const heard = r.lastHeard?.(h);
  const waitMs = heard === undefined ? r.waitMs : Math.max(0, Math.min(r.waitMs, heard + r.waitMs - performance.now()));
  const alive = await StoreClient.connect(r.store, r.waitMs, undefined, r.waitMs).catch(() => undefined);
  const gone = await StoreClient.connect(r.store, r.waitMs, undefined, r.waitMs).catch(() => undefined);
  try {
    if (!alive) return lost;
    alive.keyPrefix = regroupPrefix(r.generation);
    const answered = alive.get(`alive.${h}`, waitMs).then(
      (v): Answer => {
        const said = JSON.parse(v.toString()) as { step: number | null; oldest?: number | null };
        const completed =
          said.step === null ? null : completedOf({ step: said.step, oldest: said.oldest ?? undefined });
        return { kind: 'alive', host: h, completed };
      },
      () => lost,
    );
    const died = gone
      ? gone.get(goneKey(presenceKey(r.generation, h))).then(
          () => lost,
          () => new Promise<Answer>(() => {}), // no word either way: the answer's wait decides
        )
      : new Promise<Answer>(() => {});
    return await Promise.race([answered, died]);
  } finally {
    alive?.close();
    gone?.close();
  }
}

function verdictOf(r: RegroupRequest, steps: Map<number, Completed | null>): Verdict {
  const hosts = [...steps.keys()].sort((a, b) => a - b);
  const name = (h: number) => describeProcess(r.topology, h);
  const lost = Array.from({ length: r.topology.processes }, (_, h) => h).filter(h => !steps.has(h));
  const lostText = lost.length > 0 ? `${lost.map(name).join(', ')} lost` : 'no host lost (a host failed)';
  // hosts waiting to join count towards --min-hosts (a lost host restarted at once: the run goes on)
  const joined = (r.joining ?? []).slice(0, Math.max(0, r.maxHosts - hosts.length));
  if (hosts.length + joined.length < r.minHosts)
    return {
      kind: 'end',
      hosts,
      reason: `${lostText}: ${hosts.length} host(s) remain, fewer than --min-hosts ${r.minHosts}`,
    };
  const unknown = hosts.filter(h => steps.get(h) === null);
  if (unknown.length > 0)
    return {
      kind: 'end',
      hosts,
      reason: `${lostText}, and ${unknown.map(name).join(', ')} cannot rebuild the state of a completed step`,
    };
  // The step every survivor completed; one that went further rolls back to it (its pre-update copy of that step).
  const completed = hosts.map(h => steps.get(h)!);
  const step = Math.min(...completed.map(c => c.step));
  if (completed.some(c => c.oldest > step)) {
    const each = hosts.map((h, i) => `${name(h)}: ${completed[i].step}`).join(', ');
    return {
      kind: 'end',
      hosts,
      reason:
        `${lostText}; the survivors completed steps too far apart (${each}) to go back to one they share ` +
        `(a host keeps the step before its last)`,
    };
  }
  return { kind: 'go-on', hosts, step, joined };
}

/**
 * This host's presence in generation `generation`, from before its run joins until its regroup ends: a store
 * connection that set its presence key (the store marks it gone when the connection closes: the process died). Waits
 * for host 0's store to listen (up to `timeoutMs`); undefined when it cannot be opened (host 0 then waits out a lost
 * host's wait).
 */
export async function openPresence(
  rendezvous: Rendezvous,
  generation: number,
  rank: number,
  timeoutMs: number,
): Promise<{ close(): void } | undefined> {
  try {
    await addressTowards(rendezvous, timeoutMs);
    const client = await StoreClient.connect(storeUrl(rendezvous), timeoutMs, undefined, timeoutMs);
    const key = presenceKey(generation, rank);
    await client.set(key, '');
    // a heartbeat: host 0's store notes when it last heard from this host (a cut link: the moment of the cut)
    const beat = setInterval(() => client.add(`${key}.beats`, 1).catch(() => {}), beatMs(timeoutMs));
    beat.unref();
    return {
      close: () => {
        clearInterval(beat);
        client.close();
      },
    };
  } catch {
    return undefined;
  }
}

/** How often a host's presence connection beats: often against the stall timeout, at most once a second. */
function beatMs(stallTimeoutMs: number): number {
  return Math.min(1000, Math.max(50, stallTimeoutMs / 8));
}

/** The presence key of host `rank` in generation `generation` (the store notes when its connection last sent). */
export function presenceKey(generation: number, rank: number): string {
  return `${generationPrefix(generation)}presence.${rank}${PRESENCE_SUFFIX}`;
}

function regroupPrefix(generation: number): string {
  return `${generationPrefix(generation + 1)}regroup.`;
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
