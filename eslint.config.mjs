// @ts-check
import tseslint from 'typescript-eslint';
import boundaries from 'eslint-plugin-boundaries';

const nodeBuiltins = ['assert', 'buffer', 'child_process', 'cluster', 'crypto', 'dgram', 'dns', 'events', 'fs', 'http', 'http2', 'https', 'net', 'os', 'path', 'process', 'readline', 'stream', 'tls', 'url', 'util', 'v8', 'vm', 'worker_threads', 'zlib'];

export default tseslint.config(
  { ignores: ['node_modules/**', 'dist/**', '.data/**', 'coverage/**', '**/*.js', '**/*.mjs', '**/*.cjs', 'test/replay/histories/**', 'console/dist/**', 'console/src/api/schema.d.ts'] },
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
    // Routes never touch Temporal: starts, updates and signals go through the domain's services, whose workflow ports app/temporal-clients/ implements (failure types mapped there).
    files: ['api/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', {
        patterns: [
          { group: ['@temporalio/*'], message: 'The API reaches Temporal through the domain services (their ports are implemented by app/temporal-clients/), never directly' },
          { group: ['**/workflows', '**/workflows/*'], message: 'The API reaches workflows through the domain services' },
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

  {
    // The domain, the providers, the libraries and the schema speak neither HTTP nor Temporal's client: the API maps
    // domain errors to statuses at the edge (api/http-errors.ts), and workflows start through ports the composition
    // root fills with app/temporal-clients/.
    files: ['domain/**/*.ts', 'providers/**/*.ts', 'lib/**/*.ts', 'db/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', {
        patterns: [
          { group: ['fastify', '@fastify/*', 'fastify-plugin'], message: 'HTTP belongs in api/' },
          { group: ['@temporalio/client', '@temporalio/worker'], message: 'Temporal is reached through app/temporal-clients/ (ports) and worker/' },
        ],
      }],
    },
  },
  {
    // The layers (issue 29): what each folder may import, by kind. Deny by default; type-only imports are allowed
    // where a layer names another's shapes without running its code. docs/architecture.md draws the same rules.
    //   lib/        libraries (document extraction, audio, SIP, crypto, safe HTTP, rate limits): nothing of ours but lib/
    //   db/         entities, migrations, the ORM: lib/, and the domain's types
    //   domain/ports/ the interfaces the domain owns for the outside: lib/, and the domain's types
    //   domain/     the services per aggregate: the domain, its ports, db/, lib/ — no provider, no app/, no api/
    //   providers/  clients of the outside world (LLM, msgapp, storage, speech, LiveKit, SIP, WebRTC): the ports
    //               they implement (domain/ports/), lib/, db/ types — no domain service
    //   app/        the composition root: builds everything, so it imports every layer but api/
    //   api/        Fastify routes: app/, the domain, db/ types, lib/ — no provider
    //   activities/ Temporal activities: the domain, app/ and provider types, lib/; workflows/ for their constants
    //   workflows/  deterministic code: workflows/, activities and the domain as types only
    //   console/    the web app (browser code): console/ alone; it reaches the server through HTTP, typed by the
    //               generated console/src/api/schema.d.ts, never by importing it
    files: ['console/**/*.ts', 'console/**/*.tsx', 'api/**/*.ts', 'app/**/*.ts', 'domain/**/*.ts', 'providers/**/*.ts', 'lib/**/*.ts', 'db/**/*.ts', 'activities/**/*.ts', 'workflows/**/*.ts', 'worker/**/*.ts', 'bin/**/*.ts', 'dev/**/*.ts', 'bench/**/*.ts'],
    plugins: { boundaries },
    settings: {
      'boundaries/include': ['console/**', 'api/**', 'app/**', 'domain/**', 'providers/**', 'lib/**', 'db/**', 'activities/**', 'workflows/**', 'worker/**', 'bin/**', 'dev/**', 'bench/**', 'test/**'],
      'boundaries/elements': [
        { type: 'ports', pattern: 'domain/ports/**', partialMatch: false },
        ...['console', 'api', 'app', 'domain', 'providers', 'lib', 'db', 'activities', 'workflows', 'worker', 'bin', 'dev', 'bench', 'test'].map((t) => ({ type: t, pattern: `${t}/**`, partialMatch: false })),
      ],
      'import/resolver': { node: { extensions: ['.ts', '.tsx', '.d.ts', '.js'] } },
    },
    rules: {
      'boundaries/dependencies': ['error', {
        default: 'disallow',
        policies: [
          ...[
            ['console', ['console']],
            ['lib', ['lib']],
            ['db', ['db', 'lib']],
            ['ports', ['ports', 'lib']],
            ['domain', ['domain', 'ports', 'db', 'lib']],
            ['providers', ['providers', 'ports', 'lib']],
            ['app', ['app', 'domain', 'ports', 'providers', 'db', 'lib', 'workflows']],
            ['api', ['api', 'app', 'domain', 'ports', 'db', 'lib']],
            ['activities', ['activities', 'domain', 'ports', 'db', 'lib', 'workflows']],
            ['workflows', ['workflows']],
            ['worker', ['worker', 'app', 'activities', 'workflows', 'domain', 'ports', 'providers', 'db', 'lib']],
            ['bin', ['bin', 'api', 'app', 'worker', 'dev', 'activities', 'workflows', 'domain', 'ports', 'providers', 'db', 'lib']],
            ['dev', ['dev', 'app', 'domain', 'ports', 'providers', 'db', 'lib']],
            ['bench', ['bench', 'dev', 'api', 'app', 'worker', 'activities', 'workflows', 'domain', 'ports', 'providers', 'db', 'lib']],
          ].map(([from, to]) => ({ from: { element: { type: from } }, allow: { to: { element: { types: { anyOf: to } } } } })),
          // Names of another layer's shapes, without its code. The workflow ports (domain/ports/workflow-runs.ts) carry
          // the domain's own values (a send plan, a stored upload, a turn's reply): named, never run.
          ...[
            ['ports', ['domain']],
            ['db', ['domain', 'ports']],
            ['providers', ['db']],
            ['api', ['providers']],
            ['activities', ['app', 'providers']],
            ['workflows', ['activities', 'domain', 'ports', 'lib']],
          ].map(([from, to]) => ({ from: { element: { type: from } }, allow: { to: { element: { types: { anyOf: to } } }, dependency: { kind: 'type' } } })),
        ],
      }],
    },
  },
);
