// The GPU check bundle (tools/gpu-bundle.mjs, tools/gpu-check.sh; docs/guide/gpu.md): built here, at most 56 MiB,
// copied to a fresh folder and run there as on a bare GPU machine — no network (`unshare -n`, loopback only), a `node`
// and an `npm` on PATH that fail if called, the bundle's own Vulkan loader — on Mesa's software Vulkan with
// --accept-software: it exits 0 inside its own time budget (no phase timed out or was skipped for time), every
// correctness row is within 1e-4, and it writes its files (at most 8). Without --accept-software it stops at the
// adapter listing with exit 3. Skips, saying why, where unshare is not permitted or Mesa's Vulkan driver is missing
// (a failure with TANDEM_REQUIRE_WEBGPU=1 for the latter).
import t from 'tap';
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const LIMIT = 56 * 1024 * 1024;
const LVP = '/usr/share/vulkan/icd.d/lvp_icd.json';

function skipReason(): string | false {
  if (process.platform !== 'linux' || process.arch !== 'x64')
    return `the bundle is linux-x64 (this is ${process.arch})`;
  if (!existsSync(LVP)) {
    const why = `no Mesa Vulkan driver (${LVP}: apt-get install mesa-vulkan-drivers)`;
    if (process.env.TANDEM_REQUIRE_WEBGPU === '1') t.fail(`TANDEM_REQUIRE_WEBGPU=1 and ${why}`);
    return why;
  }
  const probe = spawnSync('unshare', ['-n', 'sh', '-c', 'ip link set lo up'], { encoding: 'utf8' });
  if (probe.status !== 0)
    return `unshare -n with ip link set lo up is not permitted here: ${(probe.error?.message ?? probe.stderr).trim()}`;
  return false;
}

const filesUnder = (dir: string, rel = ''): string[] =>
  readdirSync(path.join(dir, rel), { withFileTypes: true }).flatMap(e =>
    e.isDirectory() ? filesUnder(dir, path.join(rel, e.name)) : [path.join(rel, e.name)],
  );

/** Runs the copied gpu-check.sh with no network and a PATH whose node and npm fail; resolves with code and stdout. */
function runCheck(script: string, bin: string, args: string[]): Promise<{ code: number | null; stdout: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      'unshare',
      ['-n', 'bash', '-c', 'ip link set lo up && exec bash "$@"', 'gpu-check', script, ...args],
      {
        env: {
          PATH: `${bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`,
          HOME: process.env.HOME ?? '/root',
          TMPDIR: tmpdir(),
          TANDEM_GPU_CHECK_LOADER: 'bundled',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.on('error', reject);
    child.on('close', code => resolve({ code, stdout }));
  });
}

const skip = skipReason();
t.setTimeout(20 * 60_000);

t.test('the bundle builds within 56 MiB and its check runs on a bare, offline copy', { skip }, async t => {
  const began = Date.now();
  const scratch = mkdtempSync(path.join(tmpdir(), 'tandem-gpu-bundle-'));
  t.teardown(() => rmSync(scratch, { recursive: true, force: true }));
  const built = path.join(scratch, 'built');
  const build = spawnSync(process.execPath, [path.join(root, 'tools', 'gpu-bundle.mjs'), '--out', built], {
    encoding: 'utf8',
    // xz -0: the quickest build, and the biggest bundle, so its size bounds the default's (-2)
    env: {
      ...process.env,
      TANDEM_GPU_BUNDLE_CACHE: path.join(tmpdir(), 'tandem-gpu-bundle-cache'),
      TANDEM_GPU_BUNDLE_XZ_LEVEL: '0',
    },
  });
  t.equal(build.status, 0, `gpu-bundle.mjs exits 0${build.status === 0 ? '' : `:\n${build.stdout}${build.stderr}`}`);
  const total = filesUnder(built).reduce((s, f) => s + statSync(path.join(built, f)).size, 0);
  t.ok(total <= LIMIT, `the bundle is ${(total / 1048576).toFixed(1)} MiB <= 56 MiB`);
  t.ok(
    filesUnder(built).some(f => f.startsWith('debs/libvulkan1_')),
    'it holds the Vulkan loader package',
  );
  const buildSeconds = (Date.now() - began) / 1000;

  const copy = path.join(scratch, 'elsewhere', 'bundle');
  cpSync(built, copy, { recursive: true });
  rmSync(built, { recursive: true, force: true }); // nothing of the build is left to lean on
  const bin = path.join(scratch, 'bin');
  const calls = path.join(scratch, 'forbidden-calls');
  mkdirSync(bin);
  for (const name of ['node', 'npm']) {
    writeFileSync(
      path.join(bin, name),
      `#!/bin/sh\necho "${name} $*" >> '${calls}'\necho "FORBIDDEN: ${name}" >&2\nexit 97\n`,
    );
    chmodSync(path.join(bin, name), 0o755);
  }
  const tripwire = spawnSync(path.join(bin, 'node'), ['--version'], { encoding: 'utf8' });
  t.equal(tripwire.status, 97, 'the PATH node fails when called (so a call would be seen)');
  rmSync(calls, { force: true });

  const script = path.join(copy, 'gpu-check.sh');
  const refused = await runCheck(script, bin, ['--out', path.join(scratch, 'refused')]);
  t.equal(refused.code, 3, 'without --accept-software it stops at the adapter listing with exit 3');
  t.match(refused.stdout, /only a software adapter/, 'and says only a software adapter is visible');
  t.notOk(existsSync(path.join(scratch, 'refused', 'correctness.json')), 'before any correctness run');

  const out = path.join(scratch, 'out');
  const checkBegan = Date.now();
  const run = await runCheck(script, bin, ['--accept-software', '--out', out]);
  const checkSeconds = (Date.now() - checkBegan) / 1000;
  t.equal(run.code, 0, `gpu-check.sh --accept-software exits 0${run.code === 0 ? '' : `:\n${run.stdout}`}`);
  t.notOk(
    existsSync(calls),
    `no node or npm from PATH was called${existsSync(calls) ? `: ${readFileSync(calls)}` : ''}`,
  );
  t.notMatch(run.stdout, /TIMED OUT|budget is spent/, 'every phase finished inside the budget');
  t.match(run.stdout, /Vulkan loader: the bundle's/, "it ran on the bundle's Vulkan loader");
  t.match(run.stdout, /result: correctness passed/, 'the summary says correctness passed');
  t.match(run.stdout, /software Vulkan, not a GPU measurement/, 'llvmpipe figures are labelled as no GPU measurement');
  const files = readdirSync(out).sort();
  t.ok(files.length <= 8, `at most 8 files: ${files.join(', ')}`);
  for (const f of [
    'adapters.json',
    'correctness.json',
    'devices.json',
    'bench.json',
    'summary.txt',
    'check.log',
    'timelines.tar.gz',
  ])
    t.ok(files.includes(f), `it wrote ${f}`);
  const correctness = JSON.parse(readFileSync(path.join(out, 'correctness.json'), 'utf8')) as {
    rows: { what: string; maxDiff: number; ok: boolean }[];
  };
  t.equal(correctness.rows.length, 4, 'alexnet-mini and resnet-mini on 1 and 2 devices');
  for (const r of correctness.rows) t.ok(r.maxDiff < 1e-4, `${r.what}: ${r.maxDiff.toExponential(2)} < 1e-4`);
  const adapters = JSON.parse(readFileSync(path.join(out, 'adapters.json'), 'utf8')) as { software: boolean };
  t.equal(adapters.software, true, 'adapters.json says the adapter is software');
  const bench = JSON.parse(readFileSync(path.join(out, 'bench.json'), 'utf8')) as { rows: { gpus: number }[] };
  t.same(
    bench.rows.map(r => r.gpus),
    [1, 2],
    'bench gpu ran 1 and 2 GPU processes',
  );
  const timelines = spawnSync('tar', ['-tzf', path.join(out, 'timelines.tar.gz')], { encoding: 'utf8' });
  t.match(timelines.stdout, /alexnet-mini-2gpu\.trace\.json/, 'timelines.tar.gz holds the 2-process trace');
  t.match(timelines.stdout, /alexnet-mini-2gpu\.png/, 'and its picture');
  t.comment(
    `timings (not asserted): bundle build ${buildSeconds.toFixed(0)} s, check ${checkSeconds.toFixed(0)} s, ` +
      `whole test ${((Date.now() - began) / 1000).toFixed(0)} s`,
  );
});
