/**
 * The circle check (npm test runs it through scripts/static-checks.sh): no runtime import circle anywhere in the
 * source. Type-only imports vanish when TypeScript compiles, so they are not counted (tsPreCompilationDeps: false).
 * The layers themselves are an ESLint rule (eslint-plugin-boundaries, eslint.config.mjs).
 */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'A runtime import circle: modules that load each other. Break it by moving the shared part down a layer or injecting it.',
      from: {},
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(node_modules|dist|\\.data)/' },
    tsPreCompilationDeps: false,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
