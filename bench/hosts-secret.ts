/**
 * The job secret's overhead in the hosts bench (`npm run bench -- hosts --secret both`): each tandem schedule row ran
 * twice in the same bench run, its hosts holding the job secret (authenticated store and hub) and not (--insecure),
 * one after the other on the same link. The secret touches the set-up (store and hub handshakes, tagged store
 * messages) and the hub's step frames, never Gloo's pairs; this pairs the rows and gives their step-time ratio.
 */
import { slowerHostMedian, type HostsRow } from './hosts-figures.js';
import type { SecretMode } from './hosts-line-rate.js';
import type { TandemTimes } from './hosts-runs.js';

/** One mode's runs of a schedule: every round's timed steps pooled per host (the first run's CPU figures). */
export interface SecretRuns {
  secret: SecretMode;
  times: TandemTimes;
  roundsMs: number[];
}

/**
 * `rounds` rounds of `run` in each mode, the order turning each round (with, without; without, with; …) so that
 * neither mode always runs first after a change of schedule.
 */
export async function secretRounds(
  modes: readonly SecretMode[],
  rounds: number,
  run: (secret: SecretMode) => Promise<TandemTimes>,
): Promise<SecretRuns[]> {
  const got = new Map<SecretMode, TandemTimes[]>(modes.map(m => [m, []]));
  for (let r = 0; r < rounds; r++)
    for (const secret of r % 2 === 0 ? modes : [...modes].reverse()) got.get(secret)!.push(await run(secret));
  return modes.map(secret => {
    const all = got.get(secret)!;
    const hostsMs = all[0].hostsMs.map((_, h) => all.flatMap(t => t.hostsMs[h]));
    return { secret, times: { ...all[0], hostsMs }, roundsMs: all.map(t => slowerHostMedian(t.hostsMs)) };
  });
}

export interface SecretPair {
  model: string;
  link: string;
  schedule: string;
  withMs: number;
  withoutMs: number;
  /** with / without: 1.02 is 2 % slower with the secret. */
  ratio: number;
  /** Each round's slower-host median, with and without. */
  withRoundsMs?: number[];
  withoutRoundsMs?: number[];
}

/** Every tandem row that ran with and without the secret, paired by model, link and schedule. */
export function secretOverhead(rows: readonly HostsRow[]): SecretPair[] {
  const pairs: SecretPair[] = [];
  for (const w of rows.filter(r => r.kind === 'tandem' && r.secret === 'with')) {
    const o = rows.find(
      r =>
        r.kind === 'tandem' &&
        r.secret === 'without' &&
        r.model === w.model &&
        r.link === w.link &&
        r.schedule === `${w.schedule} (without secret)`,
    );
    if (o === undefined) continue;
    pairs.push({
      model: w.model,
      link: w.link,
      schedule: w.schedule,
      withMs: w.stepMs,
      withoutMs: o.stepMs,
      ratio: w.stepMs / o.stepMs,
      withRoundsMs: w.roundsMs,
      withoutRoundsMs: o.roundsMs,
    });
  }
  return pairs;
}

export function printSecretTable(rows: readonly HostsRow[]): void {
  const pairs = secretOverhead(rows);
  console.log(
    "\nThe job secret (docs/guide/security.md): step ms, the slower host's median of every round's timed steps, " +
      'with the secret and without it (--insecure), same bench run, the runs taking turns:\n',
  );
  console.log('| model | link | schedule | rounds | with secret ms | without ms | with / without |');
  console.log('|---|---|---|---:|---:|---:|---:|');
  for (const p of pairs)
    console.log(
      `| ${p.model} | ${p.link} | ${p.schedule} | ${p.withRoundsMs?.length ?? 1} | ` +
        `${p.withMs.toFixed(1)} | ${p.withoutMs.toFixed(1)} | ` +
        `${p.ratio.toFixed(3)} |`,
    );
}
