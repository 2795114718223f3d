/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  transform: { '^.+\\.ts$': ['@swc/jest', { jsc: { target: 'es2022', parser: { syntax: 'typescript' } } }] },
  testMatch: ['<rootDir>/test/**/*.test.ts'],
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  // Each test file gets its own database and task queue. Three workers on two cores: with two, a third of the
  // CPU sat idle (suites wait on sockets, child processes and timers); with three the run took 507 s instead of 584.
  maxWorkers: 3,
  // Longest suites first, from Jest's cache or, on a fresh clone, from suite-durations.json.
  testSequencer: '<rootDir>/test/support/sequencer.js',
  testTimeout: 60_000,
};
