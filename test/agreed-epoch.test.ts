// The epoch uneven hosts agree on (src/trainer/agreed-epoch.ts): whole global batches cut to the shortest host's;
// shares that are shardRange's of their sum make that global batch, others hosts × the smallest share.
import t from 'tap';
import { agreedEpoch, unevenWarning } from '../src/trainer/agreed-epoch.js';

t.test('whole global batches: as many as the shortest host, each the smallest', async t => {
  const agreed = agreedEpoch(
    [
      [8, 8, 8, 8, 8, 4],
      [8, 8, 8, 8, 4],
    ],
    false,
  );
  t.same(agreed.globalSizes, [8, 8, 8, 8, 4]);
  t.same(
    agreed.sizes,
    [
      [8, 8, 8, 8, 4],
      [8, 8, 8, 8, 4],
    ],
    'host 0 trains its fifth batch cut to 4 samples',
  );
  t.same(
    agreedEpoch(
      [
        [8, 8],
        [8, 8],
      ],
      false,
    ).globalSizes,
    [8, 8],
    'even hosts: their own epoch',
  );
});

t.test('shares: the global batch of their sum, or hosts × the smallest share', async t => {
  const fits = agreedEpoch(
    [
      [4, 2],
      [4, 3],
    ],
    true,
  );
  t.same(fits.globalSizes, [8, 5], 'shares 2 and 3 are shardRange(5, 2) of a global batch of 5');
  t.same(fits.sizes, [
    [4, 2],
    [4, 3],
  ]);
  const misfit = agreedEpoch(
    [
      [4, 3],
      [4, 2],
    ],
    true,
  );
  t.same(misfit.globalSizes, [8, 4], '3 then 2 is no shardRange: 2 × the smallest');
  t.same(misfit.sizes, [
    [4, 2],
    [4, 2],
  ]);
  const short = agreedEpoch(
    [
      [4, 4, 4],
      [4, 4],
    ],
    true,
  );
  t.same(short.globalSizes, [8, 8], 'host 1 one share shorter: 2 global batches');
  t.same(short.sizes, [
    [4, 4],
    [4, 4],
  ]);
});

t.test('the warning names the short host and both lengths', async t => {
  const warning = unevenWarning(
    [
      [8, 8, 8, 8, 8, 4],
      [8, 8, 8, 8, 4],
    ],
    5,
  );
  t.match(warning, /^data: host 1's dataset ends after 5 batches an epoch \(36 samples\), host 0's after 6 \(44 /);
  t.match(
    unevenWarning([[4, 4], [4, 4, 4], [4]], 1),
    /host 2's dataset ends after 1 batch an epoch .* host 0's after 2 .*, host 1's after 3/,
  );
  t.match(
    unevenWarning(
      [
        [8, 8],
        [8, 4],
      ],
      2,
    ),
    /host 1's dataset ends after 2 batches an epoch \(12 samples\), host 0's after 2 \(16 samples\)/,
    'same length: the host of fewer samples is the short one',
  );
});
