#!/usr/bin/env node
// After a failed `npm test`: name every failing assertion again, with its file, subtest path and diagnostics, so the
// last lines of a long log (all a CI page may keep) say what failed. Reads tap's saved results (.tap/test-results).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

const root = process.argv[2] ?? '.tap/test-results';

function* files(dir) {
  for (const name of readdirSync(dir)) {
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) yield* files(p);
    else if (name.endsWith('.tap')) yield p;
  }
}

/** The failing lines of one TAP file, each with the names of the subtests it sits in and its YAML block. */
function failures(text) {
  const lines = text.split('\n');
  const found = [];
  const names = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const depth = line.length - line.trimStart().length;
    const sub = /^\s*# Subtest: (.*)$/.exec(line);
    if (sub) {
      names.length = depth / 4;
      names.push(sub[1]);
      continue;
    }
    if (!/^\s*not ok \d+/.test(line)) continue;
    const yaml = [];
    for (let j = i + 1; j < lines.length && /^\s*(---|\.\.\.|\s{2}\S|\s{4})/.test(lines[j]); j++) {
      yaml.push(lines[j]);
      if (lines[j].trim() === '...') break;
    }
    found.push({ path: names.slice(0, depth / 4), line: line.trim(), yaml });
  }
  // a subtest that failed because an assertion in it did repeats that failure one level up: keep the innermost
  const title = f => f.line.replace(/^not ok \d+ - /, '').replace(/ # time=[\d.]+m?s$/, '');
  const within = (g, f) => g.path.length > f.path.length && f.path.every((n, i) => g.path[i] === n);
  return found.filter(f => !found.some(g => within(g, f) && g.path[f.path.length] === title(f)));
}

let count = 0;
try {
  for (const file of files(root)) {
    for (const f of failures(readFileSync(file, 'utf8'))) {
      count++;
      console.log(`\n✗ ${path.relative(root, file).replace(/\.tap$/, '')}`);
      for (const name of f.path) console.log(`  › ${name}`);
      console.log(`  ${f.line}`);
      for (const y of f.yaml.slice(0, 40)) console.log(`  ${y}`);
    }
  }
} catch (err) {
  console.log(`tap-failures: no saved results under ${root} (${err.message})`);
}
console.log(`\ntap-failures: ${count} failing assertion(s) named above`);
