/**
 * How a user's source (a model, a dataset, a config, a hook: a path or a
 * `file:` URL) is named in messages and opened: a `file:` URL as its path
 * (decoded: `%20` is a space), anything else as given.
 *
 * @example
 * sourcePath('file:///data/my%20set.mjs') // '/data/my set.mjs'
 */
import { fileURLToPath } from 'node:url';

export function sourcePath(source: string): string {
  return source.startsWith('file:') ? fileURLToPath(source) : source;
}
