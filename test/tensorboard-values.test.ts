// Tags and values a stranger's run can have, written by the event-file writer and read back by the independent decoder
// (test/fixtures/read-tfevents.py, which checks both CRC-32Cs of every record): tags with '/', spaces, unicode
// (outside the BMP too) and 5,000 characters, NaN and the infinities, a float32 overflow, a step past 2^32.
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { EventFileWriter } from '../src/monitor/tensorboard-writer.js';
import { decodeFile, missingDecoder } from './fixtures/tfevents-decoder.js';

const missing = missingDecoder();
if (missing && process.env.TANDEM_REQUIRE_TENSORBOARD === '1') t.fail(`TANDEM_REQUIRE_TENSORBOARD=1 but ${missing}`);
else if (missing) t.plan(0, `skipped: ${missing}`);
else
  t.test('odd tags and non-finite values read back as written', async t => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-tb-values-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const warnings: string[] = [];
    const writer = new EventFileWriter(dir, { warn: m => warnings.push(m) });
    const values = [
      { tag: 'loss/output 1', value: 0.5 },
      { tag: 'ünïcødé 日本 😀', value: 1.5 },
      { tag: 'x'.repeat(5000), value: 2.5 },
      { tag: '<script>alert(1)</script>', value: 3.5 },
      { tag: 'nan', value: NaN },
      { tag: 'inf', value: Infinity },
      { tag: '-inf', value: -Infinity },
      { tag: 'overflow', value: 1e40 },
    ];
    writer.scalars(1, values);
    writer.scalars(2 ** 33 + 1, [{ tag: 'far', value: 1 }]);
    await writer.close();
    t.same(warnings, [], 'no warning');
    const decoded = decodeFile(writer.file);
    t.equal(decoded.records, 3, 'the file version and two events');
    t.same(decoded.scalars, [
      ...values.map(v => [v.tag, 1, v.tag === 'overflow' ? Infinity : Math.fround(v.value)]),
      ['far', 2 ** 33 + 1, 1],
    ]);
  });
