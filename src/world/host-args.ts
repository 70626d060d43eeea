/**
 * Which host this process is, from the command line's environment, for the
 * fields the user did not give: tandem's own variables (TANDEM_HOSTS,
 * TANDEM_HOST_RANK, TANDEM_RENDEZVOUS), then those mpirun (Open MPI),
 * Slurm's srun, or torchrun and Kubeflow's PyTorchJob (RANK, WORLD_SIZE,
 * MASTER_ADDR, MASTER_PORT) set for every task; a Kubernetes Indexed Job's
 * JOB_COMPLETION_INDEX gives the rank alone. No MPI library is involved:
 * only the numbers are read. The library API reads no environment: its
 * callers give `hosts`, `hostRank` and `rendezvous` themselves.
 */
import { TandemError } from '../errors.js';
import { decimalCount } from '../decimal-count.js';

export interface HostFields {
  hosts?: number;
  hostRank?: number;
  rendezvous?: string;
}

type Env = Readonly<Record<string, string | undefined>>;

/** A launcher's pair of variables (rank, size), in the order they are looked at. */
const LAUNCHER_VARIABLES = [
  { launcher: 'TANDEM', rank: 'TANDEM_HOST_RANK', size: 'TANDEM_HOSTS' },
  { launcher: 'mpirun (Open MPI)', rank: 'OMPI_COMM_WORLD_RANK', size: 'OMPI_COMM_WORLD_SIZE' },
  { launcher: 'Slurm', rank: 'SLURM_PROCID', size: 'SLURM_NTASKS' },
  { launcher: 'torchrun / PyTorchJob', rank: 'RANK', size: 'WORLD_SIZE' },
] as const;

/** A Kubernetes Indexed Job's pod index: a rank without a size (the size comes from --hosts or TANDEM_HOSTS). */
export const INDEXED_JOB_RANK = 'JOB_COMPLETION_INDEX';

/** `given` completed from `env`: a field already given wins; a launcher's rank and size are taken together. */
export function hostFieldsFromEnv(given: HostFields, env: Env): HostFields {
  const out: HostFields = { ...given };
  if (out.rendezvous === undefined) out.rendezvous = rendezvousFromEnv(env);
  const pair = LAUNCHER_VARIABLES.find(v => env[v.size] !== undefined || env[v.rank] !== undefined);
  if (pair) {
    // one launcher's pair only: never a rank from one and a size from another
    const size = env[pair.size],
      rank = env[pair.rank];
    if (out.hosts === undefined && size !== undefined) out.hosts = integerFrom(pair.size, size);
    if (out.hostRank === undefined && rank !== undefined) out.hostRank = integerFrom(pair.rank, rank);
  }
  checkLocalRank(env);
  const index = env[INDEXED_JOB_RANK];
  if (out.hostRank === undefined && index !== undefined && (pair === undefined || env[pair.rank] === undefined))
    out.hostRank = integerFrom(INDEXED_JOB_RANK, index);
  if (pair) checkPair(pair, given, out, env);
  return out;
}

/**
 * A launcher's pair as read: half of it alone (a size without a rank makes every process host 0; a rank without a
 * size makes a world of 1) or a rank not below its size is refused naming the variables, not later as a bad
 * --host-rank the user never gave. A half that a flag (or the Indexed Job's index, for the rank) completes is fine.
 */
function checkPair(pair: (typeof LAUNCHER_VARIABLES)[number], given: HostFields, out: HostFields, env: Env): void {
  const size = env[pair.size],
    rank = env[pair.rank];
  const rankGiven = given.hostRank !== undefined || (rank === undefined && out.hostRank !== undefined);
  const [has, lacks, flag] =
    size === undefined && given.hosts === undefined
      ? [pair.rank, pair.size, '--hosts']
      : rank === undefined && !rankGiven
        ? [pair.size, pair.rank, '--host-rank']
        : [];
  if (has !== undefined) {
    throw new TandemError(
      'BAD_CONFIG',
      `environment variable ${has} is set but ${lacks} is not (${pair.launcher} sets both): set both in every ` +
        `process, or give ${flag}, which wins over the environment`,
    );
  }
  if (rank === undefined || given.hostRank !== undefined || out.hosts === undefined || out.hostRank! < out.hosts)
    return;
  const sizeFrom = given.hosts === undefined ? pair.size : '--hosts';
  throw new TandemError(
    'BAD_CONFIG',
    `environment variable ${pair.rank} is ${out.hostRank}, not below ${sizeFrom} ${out.hosts}: ` +
      (given.hosts === undefined
        ? `the launcher's variables disagree (ranks are 0..${pair.size}-1)`
        : `--hosts wins over ${pair.size}: give the world's size, or --host-rank too`),
  );
}

/**
 * torchrun's LOCAL_RANK and LOCAL_WORLD_SIZE: checked (decimal, rank < size) but not used. A tandem process trains all
 * of its machine's `--devices`, so the efficient shape is one process per machine (`--nproc-per-node 1`); several
 * processes per machine are several hosts of the world, each its own RANK.
 */
function checkLocalRank(env: Env): void {
  const rank = env.LOCAL_RANK,
    size = env.LOCAL_WORLD_SIZE;
  const r = rank === undefined ? undefined : integerFrom('LOCAL_RANK', rank);
  const s = size === undefined ? undefined : integerFrom('LOCAL_WORLD_SIZE', size);
  if (r !== undefined && s !== undefined && r >= s)
    throw new TandemError(
      'BAD_CONFIG',
      `environment variable LOCAL_RANK is ${r}, not below LOCAL_WORLD_SIZE ${s}: the launcher's variables disagree`,
    );
}

/**
 * TANDEM_RENDEZVOUS, else torchrun's MASTER_ADDR and MASTER_PORT (both, or neither: one alone is refused, naming the
 * other).
 */
function rendezvousFromEnv(env: Env): string | undefined {
  if (env.TANDEM_RENDEZVOUS) return env.TANDEM_RENDEZVOUS;
  const addr = env.MASTER_ADDR,
    port = env.MASTER_PORT;
  if (!addr && !port) return undefined;
  if (!addr || !port) {
    const [has, lacks] = addr ? ['MASTER_ADDR', 'MASTER_PORT'] : ['MASTER_PORT', 'MASTER_ADDR'];
    throw new TandemError(
      'BAD_CONFIG',
      `environment variable ${has} is set but ${lacks} is not: set both (host 0's address and a free port), or ` +
        'give --rendezvous HOST:PORT, which wins over the environment',
    );
  }
  return addr.includes(':') && !addr.startsWith('[') ? `[${addr}]:${port}` : `${addr}:${port}`;
}

/**
 * A variable's text as a count, written as decimal digits: `Number()` would also read `0x2`, ` 2`, `2.0` or `1e1`,
 * which a launcher never sets and a person's typo should not turn into a world size.
 */
function integerFrom(variable: string, text: string): number {
  const n = decimalCount(text);
  if (n === undefined) {
    throw new TandemError(
      'BAD_CONFIG',
      `environment variable ${variable} must be a non-negative integer written as decimal digits (e.g. 2), ` +
        `got '${text}'; fix or unset it` +
        (variable.startsWith('TANDEM_') ? '' : ', or give --hosts and --host-rank, which win over the environment'),
    );
  }
  return n;
}
