/** The entry of `npm run docs:reference` (run from the repository root). */
import { writeReference } from './write-reference.js';

for (const file of writeReference(process.cwd())) console.log(`wrote ${file}`);
