import path from 'node:path';

/**
 * Runs several small suites as one Jest test file. Jest gives every test file a fresh module registry, so each file
 * loads and compiles the same few thousand modules again (Fastify, MikroORM, zod, the Temporal client, our own
 * code): about 4 of the ~6 CPU seconds a small API suite costs before its first test, on two cores. A group file
 * (`*.group.test.ts`) requires its suites (`*.suite.ts`, each as it would stand alone: its own database, app and
 * hooks) inside one `describe` each, so they share the loaded modules and keep their own state; five small API
 * suites took 20 CPU-s together against 34 apart. Suites that change process-wide state (process.env, fake timers,
 * module mocks) or run in real time (voice, browser calls) stay in their own files.
 *
 * `names` are paths under test/ without `.suite.ts`. One suite alone: `npx jest test/api/errors.suite.ts`
 * (jest.config.js matches a suite named on the command line), or its group with `-t <name>`.
 */
export function runSuites(names: string[]): void {
  for (const name of names) {
    describe(name, () => {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      require(path.join(__dirname, '..', `${name}.suite.ts`));
    });
  }
}
