/**
 * Entry of the `tandem` command (bin/tandem.js, and each host process `tandem launch` starts): the command line
 * (command-line.ts), from the one file the build bundles it into when that is current (src/bundled-entry.ts). A
 * process then starts ~0.13 s sooner here than loading tandem's modules one by one.
 */
import { bundledEntry } from '../bundled-entry.js';

await import(bundledEntry(new URL('./command-line.js', import.meta.url)).href);
