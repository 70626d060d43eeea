// tandem's types as a TypeScript project that installed it sees them: a consumer importing 'tandem'
// (node_modules/tandem, resolved through package.json's `types`) type-checks under moduleResolution node10, node16,
// nodenext and bundler, the exported types are usable (TrainConfig, TrainSummary, startTraining's handle and its RxJS
// streams, a model and a data factory) and none of them is `any`. node10 reads no package.json "imports": the shipped
// .d.ts name tfjs and rxjs, not tandem's own '#tfjs' and '#rxjs' (tools/cjs-shims.mjs; the last test). The shipped
// .d.ts files use no name their packages mark deprecated: a
// consumer's newer @types/node drops those — @types/node 26 (what tfjs's @types/node-fetch pulls in, "*") has no
// TransferListItem, so transport.d.ts failed to compile there and, under skipLibCheck, PreparedCommunicator['transfer']
// became `any`.
import tap from 'tap';
import ts from 'typescript';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const shipped = path.join(root, 'dist', 'src') + path.sep;
const app = mkdtempSync(path.join(os.tmpdir(), 'tandem-consumer-'));
mkdirSync(path.join(app, 'node_modules'));
symlinkSync(root, path.join(app, 'node_modules', 'tandem'), 'dir');
// npm hoists tandem's dependencies next to it: the consumer's own `import type { Observable } from 'rxjs'` finds it.
symlinkSync(path.join(root, 'node_modules', 'rxjs'), path.join(app, 'node_modules', 'rxjs'), 'dir');
writeFileSync(
  path.join(app, 'package.json'),
  JSON.stringify({ name: 'consumer', type: 'module', dependencies: { tandem: '*' } }),
);
const consumer = path.join(app, 'consumer.ts');
writeFileSync(
  consumer,
  `
import { train, start, startTraining, resolveConfig, TandemError, BUILTIN_MODELS, registerTransport } from 'tandem';
import type { TrainConfig, TrainSummary, TrainingHandle, StepMetrics, RunEvent, ModelFactory, DatasetFactory, Dataset,
  PreparedCommunicator, Transport, Span } from 'tandem';
import type { Observable } from 'rxjs';

type IsAny<T> = 0 extends 1 & T ? true : false;
const notAny = <T>(_: IsAny<T> extends false ? T : never): void => undefined;

const config: TrainConfig = { model: 'mlp', data: 'synthetic-images', devices: 2, batch: 16, steps: 3 };
const handle: TrainingHandle = startTraining(config);
const metrics$: Observable<StepMetrics> = handle.metrics$;
metrics$.subscribe(m => { const loss: number = m.loss; notAny<typeof m.loss>(loss); });
handle.events$.subscribe((e: RunEvent) => { if (e.type === 'failed') console.log(e); });
handle.timeline$.subscribe((s: Span) => { const ms: number = s.end - s.start; void ms; });
handle.stop(); handle.abort();
const summary: TrainSummary = await handle.done;
notAny<TrainSummary>(summary);
notAny<TrainSummary['finalLoss']>(summary.finalLoss);
// @ts-expect-error steps is a number
const wrong: string = summary.steps;
const again = await train(config, { onStep: m => m.step });
notAny<typeof again>(again);
notAny<ReturnType<typeof start>>(start(config));
notAny<Awaited<ReturnType<typeof resolveConfig>>>(await resolveConfig(config));
const err = new TandemError('BAD_CONFIG', 'x');
notAny<typeof err.code>(err.code);
notAny<typeof BUILTIN_MODELS>(BUILTIN_MODELS);
const transfer: PreparedCommunicator['transfer'][number][number] = new ArrayBuffer(8);
notAny<PreparedCommunicator['transfer'][number][number]>(transfer);
notAny<Transport>(undefined as unknown as Transport);
notAny<Parameters<typeof registerTransport>[0]>(undefined as unknown as Transport);
const model: ModelFactory = (tf, { inputShape, classes }) =>
  tf.sequential({
    layers: [tf.layers.flatten({ inputShape }), tf.layers.dense({ units: classes, activation: 'softmax' })],
  });
const data: DatasetFactory = ({ classes = 3 }): Dataset => ({ size: 10, sampleShape: [4, 4, 1], classes,
  read: (i: number, out: Float32Array) => { out.fill(i); return i % classes; } });
console.log(wrong, model, data);
`,
);

const MODULE = {
  node10: ts.ModuleKind.ESNext,
  node16: ts.ModuleKind.Node16,
  nodenext: ts.ModuleKind.NodeNext,
  bundler: ts.ModuleKind.ESNext,
};
const RESOLUTION = {
  node10: ts.ModuleResolutionKind.Node10,
  node16: ts.ModuleResolutionKind.Node16,
  nodenext: ts.ModuleResolutionKind.NodeNext,
  bundler: ts.ModuleResolutionKind.Bundler,
};

/**
 * The consumer compiled under `mode`: the errors in the consumer and in tandem's shipped types (tfjs's own .d.ts fail
 * under strict lib checks; not tandem's). nodenext checks every .d.ts (skipLibCheck off), the others only resolve and
 * check the consumer (skipLibCheck on, as most projects have it: a third of the time).
 */
function compile(mode: 'node10' | 'node16' | 'nodenext' | 'bundler'): { program: ts.Program; errors: string[] } {
  const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2022,
    strict: true,
    noEmit: true,
    skipLibCheck: mode !== 'nodenext',
    types: ['node'],
    typeRoots: [path.join(root, 'node_modules', '@types')],
    module: MODULE[mode],
    moduleResolution: RESOLUTION[mode],
  };
  const program = ts.createProgram([consumer], options);
  const errors = ts
    .getPreEmitDiagnostics(program)
    .filter(d => d.file && (d.file.fileName === consumer || path.resolve(d.file.fileName).startsWith(shipped)))
    .map(
      d =>
        `${path.relative(app, d.file!.fileName)}(${d.file!.getLineAndCharacterOfPosition(d.start ?? 0).line + 1}): ` +
        ts.flattenDiagnosticMessageText(d.messageText, '\n'),
    );
  return { program, errors };
}

for (const mode of ['node10', 'node16', 'nodenext', 'bundler'] as const) {
  tap.test(
    `a TypeScript consumer (moduleResolution ${mode}) imports 'tandem': types resolve from the package, are usable, ` +
      `none is any`,
    async t => {
      const { program, errors } = compile(mode);
      t.same(errors, [], "no error in the consumer or in tandem's types");
      const index = program.getSourceFiles().find(f => path.resolve(f.fileName) === path.join(shipped, 'index.d.ts'));
      t.ok(index, "'tandem' resolved to the shipped dist/src/index.d.ts");
      if (mode !== 'nodenext') return;
      // The names tandem's shipped types take from other packages: none is deprecated (a newer version removes them).
      const checker = program.getTypeChecker();
      const deprecated: string[] = [];
      for (const f of program.getSourceFiles()) {
        if (!path.resolve(f.fileName).startsWith(shipped)) continue;
        for (const statement of f.statements) {
          if (
            !ts.isImportDeclaration(statement) ||
            !ts.isStringLiteral(statement.moduleSpecifier) ||
            statement.moduleSpecifier.text.startsWith('.')
          )
            continue;
          const named = statement.importClause?.namedBindings;
          if (!named || !ts.isNamedImports(named)) continue;
          for (const element of named.elements) {
            const local = checker.getSymbolAtLocation(element.name);
            const target = local && local.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(local) : local;
            if (target?.getJsDocTags(checker).some(tag => tag.name === 'deprecated')) {
              deprecated.push(
                `${path.relative(shipped, f.fileName)}: ${element.name.text} from '${statement.moduleSpecifier.text}'`,
              );
            }
          }
        }
      }
      t.same(deprecated, [], 'no deprecated name from another package in the shipped types');
    },
  );
}

tap.test("the shipped declarations import packages by their own names, never by tandem's '#' imports", async t => {
  const named: string[] = [];
  const visit = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const file = path.join(dir, entry.name);
      if (entry.isDirectory()) visit(file);
      else if (entry.name.endsWith('.d.ts') && /from ['"]#/.test(readFileSync(file, 'utf8')))
        named.push(path.relative(shipped, file));
    }
  };
  visit(shipped);
  t.same(named, [], "no .d.ts under dist/src imports from a '#' specifier");
});
