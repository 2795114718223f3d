/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  transform: {
    '^.+\\.ts$': ['@swc/jest', { jsc: { target: 'es2022', parser: { syntax: 'typescript' } } }],
    // @fastify/cookie loads the ESM-only `cookie` 2 with import(), which Jest's CommonJS runtime cannot run without
    // --experimental-vm-modules: the two are compiled to CommonJS for the tests (Node itself loads them as they are).
    '/node_modules/@fastify/cookie/.+\\.js$': ['@swc/jest', { jsc: { target: 'es2022' }, module: { type: 'commonjs' } }],
    // The console's OpenID Connect client, openid-client 6, is ESM-only, as are oauth4webapi and jose under it: the
    // same (domain/people/sso.ts loads them with import() at the first SSO request).
    '/node_modules/(openid-client|oauth4webapi|jose)/.+\\.js$': ['@swc/jest', { jsc: { target: 'es2022' }, module: { type: 'commonjs' } }],
  },
  transformIgnorePatterns: ['/node_modules/(?!@fastify/cookie/|cookie/dist/|openid-client/|oauth4webapi/|jose/)'],
  // A relative import() names the compiled file (`./direct-peer.js`), as Node's ESM rules (module nodenext) ask; the
  // tests run the .ts sources.
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  // Small suites (*.suite.ts) run inside their group file (*.group.test.ts, test/support/suites.ts); one named on the
  // command line runs alone.
  testMatch: ['<rootDir>/test/**/*.test.ts', ...(process.argv.some((a) => a.endsWith('.suite.ts')) ? ['<rootDir>/test/**/*.suite.ts'] : [])],
  // JEST_CPU_PROBE=<file.jsonl>: each file's CPU, for scripts/cpu-probe-report.ts (docs/testing.md).
  ...(process.env.JEST_CPU_PROBE ? { setupFilesAfterEnv: ['<rootDir>/test/support/cpu-probe.ts'] } : {}),
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  // Each test file gets its own database and task queue. Four workers on two cores: suites wait on sockets, child
  // processes and timers. Two left a third of the CPU idle (584 s); three, 507 s; with today's 125 suites three took
  // 581 s and four 544 s, the CPU then 88 % busy (npm test, fresh clone): more workers would only queue for it.
  // With issue 32's real-time voice (Silero, Smart Turn, speculative transcription on every pause) the suite's CPU rose
  // to ~2,300 CPU-s and four workers left the real-time suites (WebRTC, SIP, calls) short of CPU: three.
  maxWorkers: 3,
  // Longest suites first, from Jest's cache or, on a fresh clone, from suite-durations.json.
  testSequencer: '<rootDir>/test/support/sequencer.js',
  testTimeout: 60_000,
};
