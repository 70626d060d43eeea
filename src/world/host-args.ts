/**
 * Which host this process is, from the command line's environment, for the
 * fields the user did not give: tandem's own variables (TANDEM_HOSTS,
 * TANDEM_HOST_RANK, TANDEM_RENDEZVOUS), then those mpirun (Open MPI) or
 * Slurm's srun set for every task. No MPI library is involved: only the
 * numbers are read. The library API reads no environment: its callers give
 * `hosts`, `hostRank` and `rendezvous` themselves.
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
] as const;

/** `given` completed from `env`: a field already given wins; a launcher's rank and size are taken together. */
export function hostFieldsFromEnv(given: HostFields, env: Env): HostFields {
  const out: HostFields = { ...given };
  if (out.rendezvous === undefined && env.TANDEM_RENDEZVOUS) out.rendezvous = env.TANDEM_RENDEZVOUS;
  for (const v of LAUNCHER_VARIABLES) {
    const size = env[v.size];
    const rank = env[v.rank];
    if (size === undefined && rank === undefined) continue;
    if (out.hosts === undefined && size !== undefined) out.hosts = integerFrom(v.size, size);
    if (out.hostRank === undefined && rank !== undefined) out.hostRank = integerFrom(v.rank, rank);
    break; // one launcher's pair only: never a rank from one and a size from another
  }
  return out;
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
