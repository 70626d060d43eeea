#!/usr/bin/env node
// Entry of the `tandem` command: the compiled CLI (npm install runs the build).
import { existsSync } from 'node:fs';
const cli = new URL('../dist/src/cli/main.js', import.meta.url);
if (!existsSync(cli)) {
  console.error('tandem: not built yet. Run `npm install` (or `npm run build`) in the tandem folder first.');
  process.exit(1);
}
await import(cli.href);
