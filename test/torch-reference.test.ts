// The PyTorch reference's allocator (bench/torch-reference.ts): with glibc's malloc as it comes, PyTorch's freed
// tensors are unmapped and faulted back in at every step; 'kept' (the default) keeps freed memory. The harness reports
// the settings its process saw and whether a 4 MiB malloc() was its own mmap() there, so the setting is seen to reach
// it and take effect. Needs a Python with torch (Debian's python3-torch) and glibc; skipped, saying which, without
// them.
import t from 'tap';
import { findTorchPython, mallocEnv, runTorchReference } from '../bench/torch-reference.js';

const python = findTorchPython();
const report = process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined;
const header = report?.header;
const skip = !python ? 'no Python with torch here' : !header?.glibcVersionRuntime ? 'not glibc' : false;

t.test("PyTorch's malloc settings reach it and take effect", { skip }, async t => {
  const common = { mode: 'single', model: 'alexnet-mini', batch: 8, warmup: 2, steps: 3, threads: 1 } as const;
  process.env.MALLOC_TOP_PAD_ = '4096'; // this process's own are not passed on
  try {
    const kept = await runTorchReference(python!, common);
    const glibc = await runTorchReference(python!, { ...common, allocator: 'glibc' });
    t.equal(kept.allocator, 'kept', 'kept is the default');
    t.equal(glibc.allocator, 'glibc');
    t.same(mallocEnv('kept'), { MALLOC_MMAP_THRESHOLD_: '33554432', MALLOC_TRIM_THRESHOLD_: '1073741824' });
    t.same(mallocEnv('glibc'), {});
    // runTorchReference rejects a result whose process saw other settings, or where they did not take effect;
    // the probe is the evidence. The fault counts are only reported: a kernel may count none (one CI machine saw
    // 0 and 0 where this one sees 0 and ~330), and glibc's adaptive threshold makes them depend on the run.
    t.equal(kept.mallocMapsFourMiB, false, "'kept': a 4 MiB malloc() stays in the heap");
    t.equal(glibc.mallocMapsFourMiB, true, "glibc's defaults: a 4 MiB malloc() is its own mmap()");
    const [k, g] = [kept.minorFaultsPerStep, glibc.minorFaultsPerStep];
    t.ok(typeof k === 'number' && typeof g === 'number', `faults a step reported: kept ${k}, glibc ${g}`);
  } finally {
    delete process.env.MALLOC_TOP_PAD_;
  }
});
