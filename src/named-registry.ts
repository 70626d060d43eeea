/**
 * A registry of config objects by name, in the manner of tfjs-core's
 * `registerKernel`: built-in entries first, more registered at run time
 * (from plugin modules), duplicates refused, an unknown name answered with
 * an error that lists the known ones. Transports, training methods and
 * engines are each one of these. Their entries are the thread's, whichever copy of
 * tandem registers or asks (threadShared).
 */
import { TandemError } from './errors.js';

/**
 * What every copy of tandem's modules in this thread shares, made once by `create`: a plugin may load tandem from
 * another path than the thread's own (its own dependency, a link), and what it registers must still reach the run.
 * Kept on globalThis under a Symbol.for key, so it is per thread, as the registries always were.
 */
export function threadShared<T>(key: string, create: () => T): T {
  const store = globalThis as unknown as Record<symbol, T | undefined>;
  const symbol = Symbol.for(`tandem.${key}`);
  return (store[symbol] ??= create());
}

export class NamedRegistry<T extends { readonly name: string }> {
  private readonly entries: Map<string, T>;

  /**
   * `what` names an entry in messages ("transport") and keys the entries this thread's copies of tandem share;
   * `unknown` words the error for a name not registered.
   */
  constructor(
    private readonly what: string,
    builtins: readonly T[],
    private readonly unknown: (name: string, known: string[]) => TandemError,
  ) {
    this.entries = threadShared(`registry.${what}`, () => new Map(builtins.map(e => [e.name, e])));
  }

  register(entry: T): void {
    if (this.entries.has(entry.name)) {
      throw new TandemError(
        'BAD_CONFIG',
        `a ${this.what} named '${entry.name}' is already registered; give yours another name`,
      );
    }
    this.entries.set(entry.name, entry);
  }

  names(): string[] {
    return [...this.entries.keys()];
  }

  find(name: string): T | undefined {
    return this.entries.get(name);
  }

  get(name: string): T {
    const entry = this.entries.get(name);
    if (!entry) throw this.unknown(name, this.names());
    return entry;
  }
}
