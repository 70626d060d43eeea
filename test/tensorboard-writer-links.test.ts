// The TensorBoard event file is created exclusively (docs/guide/security.md): in a shared directory a symbolic link
// planted at the writer's name (it is predictable: the second and the host name) would make the run append its events
// to a file of someone else's. The writer never opens the taken name: it writes under the next free one
// (`….<pid>.<n>`), and the link and its target are left as they were; a free name is written as before.
import t from 'tap';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync, lstatSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { EventFileWriter } from '../src/monitor/tensorboard-writer.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-tb-links-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

t.test('a link planted at the event file name is passed over, its target untouched', async t => {
  const board = path.join(dir, 'shared');
  mkdirSync(board);
  const victim = path.join(dir, 'victim.txt');
  writeFileSync(victim, 'not yours\n');
  const warnings: string[] = [];
  const writer = new EventFileWriter(board, { warn: m => warnings.push(m), flushMs: 60_000 });
  // Planted before the writer's first append runs (it waits for the event loop): the name the writer will create.
  const plain = writer.file;
  symlinkSync(victim, plain);
  writer.scalars(1, [{ tag: 'loss', value: 0.5 }]);
  await writer.close();
  t.equal(readFileSync(victim, 'utf8'), 'not yours\n', "the link's target is left as it was");
  t.ok(lstatSync(plain).isSymbolicLink(), 'the link is left in place, not written through');
  t.equal(writer.file, `${plain}.${process.pid}.1`, 'the events went to the next name');
  t.ok(lstatSync(writer.file).isFile() && readFileSync(writer.file).length > 0, 'a file of its own, written');
  t.same(warnings, []);
});

t.test('a free name is created and written, events appended in order', async t => {
  const board = path.join(dir, 'free');
  const warnings: string[] = [];
  const writer = new EventFileWriter(board, { warn: m => warnings.push(m), flushMs: 60_000 });
  await writer.flush();
  const first = readFileSync(writer.file).length;
  writer.scalars(1, [{ tag: 'loss', value: 0.5 }]);
  writer.scalars(2, [{ tag: 'loss', value: 0.25 }]);
  await writer.close();
  t.ok(first > 0, 'the file-version event, first');
  t.ok(readFileSync(writer.file).length > first, 'then the steps, appended');
  t.same(warnings, []);
});
