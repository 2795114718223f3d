/**
 * npm test's type check and lint in one process, each TypeScript program built and checked once: the type check
 * (what `tsc --noEmit` and `tsc -p console --noEmit` report) and ESLint's type-aware rules (no-floating-promises,
 * no-misused-promises) share the same checker through typescript-eslint's `parserOptions.programs`, instead of ESLint's
 * project service building and checking both projects a second time (half of the static checks' CPU on two cores).
 *
 * The console's program is made after its client types are regenerated from this checkout's OpenAPI document
 * (scripts/console-build.ts --types), so a route or field the console uses and the API no longer has fails here.
 * Prints each part's findings; exits non-zero when any part fails.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import ts from 'typescript';
import { ESLint } from 'eslint';

const ROOT = path.resolve(__dirname, '..');

function programOf(tsconfig: string): ts.Program {
  const host: ts.ParseConfigFileHost = {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (d) => {
      throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    },
  };
  const parsed = ts.getParsedCommandLineOfConfigFile(path.join(ROOT, tsconfig), {}, host)!;
  return ts.createProgram({ rootNames: parsed.fileNames, options: parsed.options, projectReferences: parsed.projectReferences });
}

const formatHost: ts.FormatDiagnosticsHost = { getCanonicalFileName: (f) => f, getCurrentDirectory: () => ROOT, getNewLine: () => '\n' };

/** The program's errors as tsc prints them; true when there are none. */
function typecheck(name: string, program: ts.Program): boolean {
  const diagnostics = ts.getPreEmitDiagnostics(program);
  if (diagnostics.length) console.log(`[${name}]\n${ts.formatDiagnostics(diagnostics, formatHost)}`);
  return diagnostics.length === 0;
}

async function main(): Promise<number> {
  const failed: string[] = [];
  const server = programOf('tsconfig.json');
  if (!typecheck('typecheck', server)) failed.push('typecheck');

  const types = spawnSync(process.execPath, ['--import', 'tsx', 'scripts/console-build.ts', '--types'], { cwd: ROOT, encoding: 'utf8' });
  let browser: ts.Program | null = null;
  if (types.status !== 0) {
    console.log(`[console]\n${types.stdout}${types.stderr}`);
    failed.push('console');
  } else {
    browser = programOf('console/tsconfig.json');
    if (!typecheck('console', browser)) failed.push('console');
  }

  // The lint, over the same programs (a file in neither is an error of the lint's own).
  const eslint = new ESLint({
    cwd: ROOT,
    overrideConfig: [{ languageOptions: { parserOptions: { projectService: false, project: null, programs: browser ? [server, browser] : [server] } } }],
  });
  const results = await eslint.lintFiles(browser ? ['.'] : ['.', '!console/**']);
  const text = await (await eslint.loadFormatter('stylish')).format(results);
  if (text.trim()) console.log(`[lint]\n${text}`);
  if (results.some((r) => r.errorCount > 0)) failed.push('lint');

  for (const part of failed) console.log(`[${part}] failed`);
  return failed.length ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err);
    process.exit(2);
  },
);
