/**
 * Imports a user's ES module (a model, data or plugin module) and names it
 * when that fails: the file, the error, and for a syntax error the line
 * (Node's import error carries no location; `node --check` finds it). A
 * module whose default export is no factory function is told which way out
 * fits what it exports (a named export, a class, an object).
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
    throw new TandemError(
      CODES[kind],
      `${kind} module ${file} cannot be loaded: ` +
        `${err instanceof Error ? `${err.name}: ${err.message}` : String(err)}${where}`,
      undefined,
      { cause: err },
    );
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

/** What a module's default export is instead of a factory function, with the fix; undefined when it is a factory. */
export function defaultExportProblem(mod: Record<string, unknown>): string | undefined {
  const d = mod.default;
  if (d === undefined) {
    const functions = Object.keys(mod).filter(k => typeof mod[k] === 'function');
    return functions.length === 0
      ? 'no default export'
      : `no default export, only named exports (${functions.join(', ')}): make the factory the default, e.g. export ` +
          `default ${functions[0]}`;
  }
  if (typeof d === 'function') {
    if (!/^class\b/.test(Function.prototype.toString.call(d))) return undefined;
    const name = d.name || 'TheClass';
    return (
      `a class (${name}), which tandem cannot call without new: export a factory that builds it, e.g. export ` +
      `default (options) => new ${name}(options)`
    );
  }
  if (typeof d === 'object' && d !== null) {
    return (
      'a default export of type object: export a function that returns it, e.g. export default () => theObject ' +
      "(tandem calls it with the run's options, seed included)"
    );
  }
  return `a default export of type ${typeof d}`;
}
