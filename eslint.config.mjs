// @ts-check
import tseslint from 'typescript-eslint';

const nodeBuiltins = ['assert', 'buffer', 'child_process', 'cluster', 'crypto', 'dgram', 'dns', 'events', 'fs', 'http', 'http2', 'https', 'net', 'os', 'path', 'process', 'readline', 'stream', 'tls', 'url', 'util', 'v8', 'vm', 'worker_threads', 'zlib'];

export default tseslint.config(
  { ignores: ['node_modules/**', 'dist/**', '.data/**', 'coverage/**', '**/*.js', '**/*.mjs', 'test/replay/histories/**'] },
  ...tseslint.configs.recommended,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-explicit-any': 'off',
    },
  },
  {
    // Routes never touch Temporal: starts, updates and signals go through gateways/ (failure types mapped there).
    files: ['api/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', {
        patterns: [
          { group: ['@temporalio/*'], message: 'The API reaches Temporal through gateways/, never directly' },
          { group: ['**/workflows', '**/workflows/*'], message: 'The API reaches workflows through gateways/' },
        ],
      }],
    },
  },
  {
    // One owner per table, through the ORM: every source file queries through the entities
    // (EntityManager, QueryBuilder), and execute()/raw() are refused. The few statements the
    // ORM cannot say well stay raw inside the module owning their table, each under a
    // `// raw SQL: <reason>` comment with an eslint-disable-next-line, so a new raw call anywhere
    // fails lint. Temporal's client.workflow.execute() is not SQL. Tests and benches read tables
    // directly to check what the product wrote, so they are outside the rule.
    files: ['api/**/*.ts', 'app/**/*.ts', 'domain/**/*.ts', 'providers/**/*.ts', 'lib/**/*.ts', 'db/**/*.ts', 'activities/**/*.ts', 'worker/**/*.ts', 'bin/**/*.ts', 'dev/**/*.ts', 'workflows/**/*.ts'],
    rules: {
      'no-restricted-syntax': ['error', {
        selector: "CallExpression[callee.property.name=/^(execute|raw)$/]:not([callee.object.property.name='workflow']), CallExpression[callee.name='raw'], TaggedTemplateExpression[tag.name='sql']",
        message: 'Query through the entities (em.find/insert/nativeUpdate…, QueryBuilder) in the module that owns the table; raw SQL only where the ORM cannot say it, there, marked with a `// raw SQL: <reason>` comment',
      }],
    },
  },
  {
    // The workflow sandbox: deterministic code only. No Node built-ins, no ORM, no HTTP
    // clients, nothing from the API; activities are imported as types only.
    files: ['workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', {
        paths: nodeBuiltins.flatMap((m) => [m, `node:${m}`]).map((name) => ({ name, message: 'Node built-ins are not available in the workflow sandbox' })),
        patterns: [
          { group: ['@mikro-orm/*', 'pg', 'ioredis', 'undici', 'axios', 'node-fetch', 'fastify', '@fastify/*'], message: 'I/O belongs in activities, not workflows' },
          { group: ['../api/*', '../api', '../db/*', '../worker/*', '../dev/*', '../app/*', '../providers/*'], message: 'Workflows must not import service code' },
          { group: ['../activities', '../activities/*'], importNamePattern: '^(?!Activities$|ActivityDeps$)', message: 'Import activities as types only' },
        ],
      }],
      'no-restricted-globals': ['error', { name: 'setTimeout', message: 'Use sleep() from @temporalio/workflow' }, { name: 'fetch', message: 'I/O belongs in activities' }],
    },
  },
);
