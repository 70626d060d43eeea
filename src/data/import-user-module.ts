/**
 * Imports a user's ES module (a model, data or plugin module) and names it
 * when that fails: the file, the error, and for a syntax error the line
 * (Node's import error carries no location; `node --check` finds it).
 */
import { execFileSync } from 'node:child_process';
import { TandemError, type TandemErrorCode } from '../errors.js';
import { sourcePath } from '../source-path.js';

export type UserModuleKind = 'model' | 'data' | 'plugin';

const CODES: Record<UserModuleKind, TandemErrorCode> = { model: 'BAD_MODEL', data: 'BAD_DATA', plugin: 'BAD_CONFIG' };

export function userModuleErrorCode(kind: UserModuleKind): TandemErrorCode {
  return CODES[kind];
}

export async function importUserModule(url: string, kind: UserModuleKind): Promise<{ default?: unknown }> {
  try {
    return (await import(url)) as { default?: unknown };
  } catch (err) {
    const file = sourcePath(url);
    const where = err instanceof SyntaxError ? syntaxErrorLocation(file) : '';
    throw new TandemError(CODES[kind], `${kind} module ${file} cannot be loaded: ${err instanceof Error ? `${err.name}: ${err.message}` : String(err)}${where}`,
      undefined, { cause: err });
  }
}

/** ` at line N: <source line>` from `node --check`, or '' when it says nothing usable. */
function syntaxErrorLocation(file: string): string {
  try {
    execFileSync(process.execPath, ['--check', file], { stdio: ['ignore', 'ignore', 'pipe'], timeout: 10_000 });
    return '';
  } catch (err) {
    const stderr = String((err as { stderr?: Buffer }).stderr ?? '');
    const [first, source] = stderr.split('\n');
    const line = /:(\d+)$/.exec(first ?? '')?.[1];
    return line ? ` (line ${line}: ${(source ?? '').trim()})` : '';
  }
}
