/** `npm run docs:reference`: writes docs/reference/options.md and errors.md from the declarations. */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { errorsReference, optionsReference } from './reference-docs.js';

export const REFERENCE_FILES = {
  'docs/reference/options.md': optionsReference,
  'docs/reference/errors.md': errorsReference,
} as const;

export function writeReference(root: string): string[] {
  const written: string[] = [];
  for (const [file, generate] of Object.entries(REFERENCE_FILES)) {
    const to = path.join(root, file);
    mkdirSync(path.dirname(to), { recursive: true });
    writeFileSync(to, generate());
    written.push(file);
  }
  return written;
}
