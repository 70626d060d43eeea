// Lint and size budgets, checked in CI by `npm run lint` (every rule an error).
// Budgets: files <= 400 lines, functions <= 60 lines (src/, blank and comment lines not counted), lines <= 120.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'native/**', 'out/**', 'docs/api/**', '**/*.js', '**/*.mjs', '**/*.cjs'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['src/**/*.ts', 'test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      'max-lines': ['error', { max: 400, skipBlankLines: false, skipComments: false }],
      // a regular expression is matched as written: breaking one would change the assertion
      'max-len': ['error', { code: 120, tabWidth: 2, ignoreUrls: false, ignoreRegExpLiterals: true }],
      // `t.equal(…) || t.comment(…)`: tap's way to show more when an assertion fails
      '@typescript-eslint/no-unused-expressions': ['error', { allowShortCircuit: true, allowTernary: true }],
      '@typescript-eslint/no-unused-vars': ['error', { ignoreRestSiblings: true, argsIgnorePattern: '^_' }],
    },
  },
  {
    files: ['test/**/*.ts'],
    // a message matched as it is printed, two spaces of indentation and all
    rules: { 'no-regex-spaces': 'off' },
  },
  {
    files: ['src/**/*.ts'],
    rules: {
      'max-lines-per-function': ['error', { max: 60, skipBlankLines: true, skipComments: true, IIFEs: true }],
      // values from the CommonJS packages tfjs and rxjs through package.json "imports" (tools/cjs-shims.mjs says why:
      // an ES import of the package itself makes Node lex it, or load its 250 files, in every thread that loads it)
      '@typescript-eslint/no-restricted-imports': [
        'error',
        ...[
          ['@tensorflow/tfjs', '#tfjs'],
          ['@tensorflow/tfjs-backend-cpu', '#tfjs-backend-cpu'],
          ['rxjs', '#rxjs'],
        ].map(([name, shim]) => ({ name, allowTypeImports: true, message: `import values from '${shim}'` })),
      ],
    },
  },
);
