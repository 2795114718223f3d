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
    // One owner per table, through the ORM: in the modules converted so far, SQL strings are refused unless the
    // line is marked (eslint-disable-next-line) under a `// raw SQL: <reason>` comment. Other modules join the list as
    // they are converted.
    files: [
      'core/auth/api-keys.ts',
      'core/idempotency/store.ts',
      'core/credentials.ts',
      'core/kb/folders.ts',
      'core/agents/agents.ts',
      'core/customers/customers.ts',
      'core/webhooks/subscriptions.ts',
      'core/webhooks/deliveries.ts',
      'core/webhooks/emitter.ts',
      'core/messages/messages.ts',
      'core/messages/plan.ts',
    ],
    rules: {
      'no-restricted-syntax': ['error', {
        selector: "CallExpression[callee.property.name=/^(execute|raw)$/], CallExpression[callee.name='raw']",
        message: 'Query through the entities (em.find/insert/nativeUpdate…, QueryBuilder); raw SQL only where the ORM cannot say it, marked with a `// raw SQL: <reason>` comment',
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
          { group: ['../api/*', '../api', '../core/db/*', '../worker/*', '../infra/*'], message: 'Workflows must not import service code' },
          { group: ['../activities', '../activities/*'], importNamePattern: '^(?!Activities$|ActivityDeps$)', message: 'Import activities as types only' },
        ],
      }],
      'no-restricted-globals': ['error', { name: 'setTimeout', message: 'Use sleep() from @temporalio/workflow' }, { name: 'fetch', message: 'I/O belongs in activities' }],
    },
  },
);
