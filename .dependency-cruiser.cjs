/**
 * Dependency rules for tandem, checked by `npm run deps` (dependency-cruiser)
 * in CI before the tests. Every rule is an error: a violation fails the run.
 *
 * Paths are relative to the repository root and are the TypeScript sources
 * (the `.js` specifiers of NodeNext imports resolve to the `.ts` files).
 *
 * The layers, lowest first (LAYERS below). A module may import from its own layer and the ones below it, never from a
 * higher one (`import type` counts: a type is a design dependency):
 *   base            the root helpers (errors, named-registry, addon-load, source-path, decimal-count, json-place, bundled-entry,
 *                   config-checks, nearest-name), the option declarations and checks (src/options), src/output's plain file
 *                   helpers (atomic-write, fs-reason, make-directory, run-lock, kernel-lock, locked-places), the
 *                   job's plain data
 *                   (src/world/topology.ts, peer-wait.ts, job-secret.ts), the worker threads' Node flags
 *                   (src/actors/worker-exec-argv.ts: every spawner's, the loader pools' too)
 *   kernels         src/engine/native, src/engine/tfjs-types.ts, kernel-attrs.ts, sole-reader.ts and
 *                   output-destination.ts, the fp16 codec
 *                   (src/pipeline/hooks/half-float.ts)
 *   collectives     src/collectives, and where hosts meet (src/world/rendezvous.ts serves the gloo store)
 *   optim           src/optim (the flat updates; an engine's arithmetic runs them)
 *   engine          src/engine (backends, engines, gradient tape)
 *   monitor         src/monitor, src/checkpoint (the checkpoint file and its store)
 *   model/data      src/model, src/data, src/plugins (plugin loading, plugin options' values, step probes)
 *   pipeline        src/pipeline (strategy, schedule, hooks, operators, the control block), and the method internals
 *                   the configuration names (src/classifier: classifier-head, partial-fc, label-partition)
 *   config types    src/config-types.ts and the sections it joins (each section's *-options.ts, most in their own
 *                   folder's layer; world's and methods' here), the host checks (src/world: resolve-hosts, host-args, gpu-pinning, gpu-inventory),
 *                   the rest of src/output (the output places, the room for results)
 *   actors          src/actors: the thread protocol, shared buffers, worker helpers, model files
 *   methods         src/methods, src/classifier (the rest)
 *   config          src/config.ts, src/config/ (checkConfig, prepareConfig: a config checked against the registered
 *                   parts), the option registry (src/options/option-registry.ts: every section and part's options)
 *   device threads  src/actors: device-actor, device-replica (backward-pass, step-passes, replica-model,
 *                   forward-gate, inline-update), the workers (compute-worker; comm-worker with comm-stages,
 *                   exchange-orders)
 *   profiling       src/profiling
 *   world           src/world (the rest: host flags, host channel, launch, monitor hub, link probe)
 *   trainer         src/trainer
 *   fit             src/fit (tfjs's model.fit / evaluate surface over train)
 *   cli             src/cli
 *   index           src/index.ts
 * A file that sits in a lower layer than its folder is named in that layer's paths (a module's layer is the lowest
 * whose paths match it); every module of src/ is in a layer (rule every-module-in-a-layer).
 */
const LAYERS = [
  {
    name: 'base',
    paths: [
      '^src/(errors|named-registry|addon-load|source-path|decimal-count|json-place|config-checks|bundled-entry|read-regular-file|nearest-name)\\.ts$',
      '^src/options/(declaration|option-checks)\\.ts$',
      '^src/output/(atomic-write|fs-reason|make-directory|run-lock|kernel-lock|locked-places)\\.ts$',
      '^src/world/(topology|peer-wait|job-secret)\\.ts$',
      '^src/actors/worker-exec-argv\\.ts$',
    ],
  },
  {
    name: 'kernels',
    paths: [
      '^src/engine/native/',
      '^src/engine/(tfjs-types|kernel-attrs|sole-reader|output-destination|softmax-cross-entropy|kernel-trace|kept-for-closure|dropout-kernel)\\.ts$',
      '^src/pipeline/hooks/half-float\\.ts$',
    ],
  },
  { name: 'collectives', paths: ['^src/collectives/', '^src/world/rendezvous\\.ts$'] },
  { name: 'optim', paths: ['^src/optim/'] },
  { name: 'engine', paths: ['^src/engine/'] },
  { name: 'monitor', paths: ['^src/monitor/', '^src/checkpoint/'] },
  { name: 'model/data', paths: ['^src/model/', '^src/data/', '^src/plugins/'] },
  { name: 'pipeline', paths: ['^src/pipeline/', '^src/classifier/(classifier-head|partial-fc|label-partition)\\.ts$'] },
  {
    name: 'config types',
    paths: [
      '^src/config-types\\.ts$',
      '^src/(world/world|methods/method)-options\\.ts$',
      '^src/output/',
      '^src/world/(resolve-hosts|secret-file|host-args|gpu-pinning|gpu-inventory)\\.ts$',
    ],
  },
  {
    name: 'actors',
    paths: [
      '^src/actors/(?!(device-actor|device-replica|compute-worker|comm-worker|forward-gate|backward-pass|step-passes|replica-model|comm-stages|exchange-orders|inline-update)\\.ts$)',
    ],
  },
  { name: 'methods', paths: ['^src/methods/', '^src/classifier/'] },
  { name: 'config', paths: ['^src/config\\.ts$', '^src/config/', '^src/options/'] },
  { name: 'device threads', paths: ['^src/actors/'] },
  { name: 'profiling', paths: ['^src/profiling/'] },
  { name: 'world', paths: ['^src/world/'] },
  { name: 'trainer', paths: ['^src/trainer/'] },
  { name: 'fit', paths: ['^src/fit/'] },
  { name: 'cli', paths: ['^src/cli/'] },
  { name: 'index', paths: ['^src/index\\.ts$'] },
];

/** A module's layer is the first (lowest) whose paths match it: a file named in a lower layer than its folder. */
const matchesAny = paths => `(${paths.join('|')})`;

/** One rule per layer: its modules (those no lower layer claims) import nothing from a higher layer. */
const layerRules = LAYERS.map((layer, i) => {
  const lower = LAYERS.slice(0, i).flatMap(l => l.paths);
  const higher = LAYERS.slice(i + 1).flatMap(l => l.paths);
  const own = LAYERS.slice(0, i + 1).flatMap(l => l.paths);
  return {
    name: `layer-${layer.name.replace(/[^a-z]+/g, '-')}-not-upward`,
    severity: 'error',
    comment:
      `The ${layer.name} layer must not import from a higher layer (${LAYERS.slice(i + 1)
        .map(l => l.name)
        .join(', ')}). Move the shared piece down to the lower layer, or pass it in as an argument; the layers ` +
      'are listed in the header of .dependency-cruiser.cjs.',
    from: { path: matchesAny(layer.paths), ...(lower.length > 0 ? { pathNot: matchesAny(lower) } : {}) },
    to: { path: matchesAny(higher.length > 0 ? higher : ['^$']), pathNot: matchesAny(own) },
  };
});

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment:
        'Modules must not depend on themselves through other modules. A cycle means neither side can be ' +
        'understood, tested or moved without the other, and in ESM it can leave a binding undefined at ' +
        'import time. Type-only imports count too (tsPreCompilationDeps): a cycle through `import type` is ' +
        'still a design cycle even though the compiler erases it. Break it by moving the shared piece to ' +
        'the lower layer or by passing the dependency in as an argument.',
      from: { path: '^(src|test|bench)/' },
      to: { circular: true },
    },
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      comment:
        'An import that resolves to nothing (a typo, a moved or deleted file, a package missing from ' +
        'package.json) fails at run time; catch it here.',
      from: {},
      to: { couldNotResolve: true },
    },
    {
      name: 'src-not-to-test-or-bench',
      severity: 'error',
      comment:
        'The library (src/) ships; test/ and bench/ do not (and are not in the package). Library code ' +
        'that imports a fixture or a bench helper breaks for every consumer.',
      from: { path: '^src/' },
      to: { path: '^(test|bench)/' },
    },
    ...layerRules,
    {
      name: 'every-module-in-a-layer',
      severity: 'error',
      comment: 'Every module of src/ belongs to a layer of LAYERS (.dependency-cruiser.cjs); add a new folder to one.',
      from: {},
      to: { path: '^src/', pathNot: matchesAny(LAYERS.flatMap(l => l.paths)) },
    },
    {
      name: 'actors-not-to-method-internals',
      severity: 'error',
      comment:
        'The device threads know a method only through the method registry (src/methods): classifier heads, ' +
        'Partial FC and label partitions are method internals. An actor importing them is a method switch ' +
        'creeping back into the actors.',
      from: { path: '^src/actors/' },
      to: { path: '^src/classifier/' },
    },
    {
      name: 'engines-through-the-registry',
      severity: 'error',
      comment:
        'Which engine runs is answered by the engine registry (src/engine/engine-registry.ts); outside src/engine ' +
        "(and optim's native arithmetic) nothing imports an engine implementation or the native kernels directly.",
      from: { path: '^src/', pathNot: '^src/(engine|optim)/' },
      to: { path: '^src/engine/(engines|native)/' },
    },
    {
      name: 'worker-entries-are-not-libraries',
      severity: 'error',
      comment:
        'A worker entry module (src/**/*-worker.ts, src/data/load-shard-task.ts) is loaded by `new Worker` / ' +
        'piscina, and its top level talks to parentPort. Other modules may import its message types ' +
        "(`import type`) but never its code: that would run the worker's top level in the importing " +
        'thread. (The rule "only src/actors/*-worker.ts may be worker entries" is not expressible here: ' +
        '`new Worker(new URL(...))` is not an import, so dependency-cruiser does not see it.) ' +
        'src/actors/one-shot-worker.ts is the helper that spawns workers, not an entry.',
      from: {},
      to: {
        path: ['^src/.+-worker\\.ts$', '^src/data/load-shard-task\\.ts$'],
        pathNot: '^src/actors/one-shot-worker\\.ts$',
        dependencyTypesNot: ['type-only', 'type-import'],
      },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // Count `import type` / `export type` edges as dependencies (they are, at design time).
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      mainFields: ['module', 'main', 'types', 'typings'],
    },
  },
};
