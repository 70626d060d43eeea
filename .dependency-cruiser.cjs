/**
 * Dependency rules for tandem, checked by `npm run deps` (dependency-cruiser)
 * in CI before the tests. Every rule is an error: a violation fails the run.
 *
 * Paths are relative to the repository root and are the TypeScript sources
 * (the `.js` specifiers of NodeNext imports resolve to the `.ts` files).
 */
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
    {
      name: 'pipeline-operators-not-to-trainer-or-workers',
      severity: 'error',
      comment:
        'The pipeline operators are the per-step stages run inside the device actors; the trainer drives ' +
        'them from above. An operator importing src/trainer turns the layering upside down (and cycles ' +
        'through train.ts), and importing a worker entry (src/actors/*-worker.ts) would run that worker\'s ' +
        'top-level code in whichever thread loads the operator.',
      from: { path: '^src/pipeline/operators/' },
      to: { path: ['^src/trainer/', '^src/actors/[^/]+-worker\\.ts$'] },
    },
    {
      name: 'collectives-are-a-leaf',
      severity: 'error',
      comment:
        'The collectives (all-reduce over shared memory) are a transport layer below the optimiser, the ' +
        'trainer, the classifier and the models: they move flat Float32 buffers and must not know what ' +
        'the numbers mean. Anything they need from those layers is passed in by the caller.',
      from: { path: '^src/collectives/' },
      to: { path: '^src/(optim|trainer|classifier|model)/' },
    },
    {
      name: 'engine-not-to-upper-layers',
      severity: 'error',
      comment:
        'src/engine (backends, kernels, gradient tape) is the bottom compute layer used by the actors, the ' +
        'classifier and the trainer; it must not import them back.',
      from: { path: '^src/engine/' },
      to: { path: '^src/(trainer|actors|classifier)/' },
    },
    {
      name: 'collectives-are-rank-local',
      severity: 'error',
      comment:
        'A collective sees only its own rank\'s buffer and reaches its peers through its transport; it must ' +
        'not reach into the device actors (control block, shared buffers) or the methods that use it, so a ' +
        'network or hierarchical transport can take its place.',
      from: { path: '^src/collectives/' },
      to: { path: '^src/(actors|methods|pipeline)/' },
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
        '(and optim\'s native arithmetic) nothing imports an engine implementation or the native kernels directly.',
      from: { path: '^src/', pathNot: '^src/(engine|optim)/' },
      to: { path: '^src/engine/(engines|native)/' },
    },
    {
      name: 'world-is-a-leaf',
      severity: 'error',
      comment: 'The topology is plain data about the job; everything may use it, it uses nothing. (The rest of src/world — host flags, ' +
        'rendezvous, launch — joins processes and may use errors, config types and the store.)',
      from: { path: '^src/world/topology\\.ts$' },
      to: { path: '^src/' , pathNot: '^src/world/' },
    },
    {
      name: 'monitor-not-to-trainer',
      severity: 'error',
      comment:
        'src/monitor (spans, run events, traces, timeline pictures) describes a run; the trainer produces ' +
        'the data and calls the monitor, never the other way round.',
      from: { path: '^src/monitor/' },
      to: { path: '^src/trainer/' },
    },
    {
      name: 'worker-entries-are-not-libraries',
      severity: 'error',
      comment:
        'A worker entry module (src/**/*-worker.ts, src/data/load-shard-task.ts) is loaded by `new Worker` / ' +
        'piscina, and its top level talks to parentPort. Other modules may import its message types ' +
        '(`import type`) but never its code: that would run the worker\'s top level in the importing ' +
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
