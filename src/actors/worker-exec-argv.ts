/**
 * The Node flags of tandem's worker threads. Node starts a worker with its
 * process's flags (`process.execArgv`), loader hooks included, and every
 * module the worker imports then passes through those hooks: a test runner's
 * mock and coverage hooks made each device thread's start ~1 s slower here.
 * A worker also applies the `NODE_OPTIONS` of its environment (a test
 * runner's `--import` hooks reach it that way too). `TANDEM_WORKER_EXEC_ARGV`,
 * a JSON array of strings, is then the whole of a worker's flags (`[]`: none):
 * its execArgv, with `NODE_OPTIONS` left out of its environment. Unset, the
 * process's, as Node does: a `--import tsx` that loads the user's TypeScript
 * modules reaches the device threads.
 *
 * @example
 * // TANDEM_WORKER_EXEC_ARGV='[]'   (what every test process sets: test/fixtures/test-process-env.ts)
 * new Worker(url, { ...workerFlags() });
 */
import { TandemError } from '../errors.js';

export const WORKER_EXEC_ARGV_ENV = 'TANDEM_WORKER_EXEC_ARGV';

/**
 * A new worker thread's options for its flags: none given (Node's default: the process's, `processArgv`), or
 * execArgv and env. `--input-type` is the one flag of the process a worker refuses (Node throws
 * ERR_INPUT_TYPE_NOT_ALLOWED: a program run as `node --input-type=module -e …` lost every device thread): it is left
 * out.
 */
export function workerFlags(
  env: NodeJS.ProcessEnv = process.env,
  processArgv: readonly string[] = process.execArgv,
): { execArgv?: string[]; env?: NodeJS.ProcessEnv } {
  const execArgv = workerExecArgv(env);
  if (execArgv === undefined) {
    const kept = processArgv.filter((a, i) => !a.startsWith('--input-type') && processArgv[i - 1] !== '--input-type');
    return kept.length === processArgv.length ? {} : { execArgv: kept };
  }
  const { NODE_OPTIONS: _options, ...rest } = env;
  void _options;
  return { execArgv, env: rest };
}

/** The flags for a new worker thread; undefined: the process's (Node's default). */
export function workerExecArgv(env: NodeJS.ProcessEnv = process.env): string[] | undefined {
  const raw = env[WORKER_EXEC_ARGV_ENV];
  if (raw === undefined || raw === '') return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    parsed = undefined;
  }
  if (!Array.isArray(parsed) || !parsed.every(a => typeof a === 'string')) {
    throw new TandemError(
      'BAD_CONFIG',
      `${WORKER_EXEC_ARGV_ENV}=${raw} is not a JSON array of strings; give e.g. '[]' (no flags) ` +
        `or '["--import=tsx"]', or unset it for the process's own flags`,
    );
  }
  return parsed;
}
