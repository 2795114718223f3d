import Ajv2020 from 'ajv/dist/2020';
import Ajv07, { type ErrorObject } from 'ajv';
import addFormats from 'ajv-formats';
import { RE2JS } from 're2js';

/**
 * Caller-supplied regular expressions (a schema's `pattern`, `patternProperties` keys,
 * `propertyNames`) run on RE2 (re2js: pure JavaScript, time linear in the input), never
 * on V8's backtracking RegExp, where `^(a+)+$` against 30 a's and a `!` takes seconds and
 * blocks the process. What RE2 cannot run (lookaround, back-references) is refused up
 * front with the keyword named, so a caller knows why; the caps below keep what llama.cpp
 * turns into a grammar small (it copies a `{n,m}` body up to m times).
 *
 * This module is shared by the main thread (compile checks) and the validation thread
 * (./validate-thread.ts), so it imports nothing of the service.
 */

/** Longest pattern accepted, in characters. */
export const MAX_PATTERN_CHARS = 512;
/** Largest repetition bound (`{n}`, `{n,}`, `{n,m}`) accepted in a pattern. */
export const MAX_PATTERN_REPEAT = 256;

/** A pattern compiled by RE2 with the one method ajv calls. */
interface RegExpLike {
  test(s: string): boolean;
  toString(): string;
}

/**
 * ajv's `code.regExp`: ajv calls it with the pattern and its flags ('u') and only ever calls
 * `test`. ECMAScript syntax RE2 also has (`\u00e9`, `(?<name>…)`) is translated by re2js.
 * `code` is what ajv would write into standalone code, which we never generate.
 */
export const re2Engine = Object.assign(
  (pattern: string): RegExpLike => {
    const re = RE2JS.compile(RE2JS.translateRegExp(pattern));
    // ajv shares compiled patterns across schemas keyed by toString(): it must be the pattern's own.
    return { test: (s: string) => re.test(s), toString: () => `re2:${pattern}` };
  },
  { code: 'require("re2js").RE2JS' },
);

/**
 * Why a pattern cannot be run in linear time (or is over our caps), or null. Lookarounds
 * and back-references are found by a scan of our own: re2js silently reads `\k<name>` as
 * the letter k, and its error messages name RE2's syntax, not the JSON Schema's.
 */
export function regexProblem(pattern: string): string | null {
  if (pattern.length > MAX_PATTERN_CHARS) return `is longer than ${MAX_PATTERN_CHARS} characters`;
  let inClass = false;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '\\') {
      const next = pattern[i + 1] ?? '';
      if (!inClass && (/[1-9]/.test(next) || (next === 'k' && pattern[i + 2] === '<'))) return `uses a back-reference (\\${next}${next === 'k' ? '<…>' : ''}), which a linear-time regex engine cannot run`;
      i++;
      continue;
    }
    if (inClass) {
      if (c === ']') inClass = false;
      continue;
    }
    if (c === '[') inClass = true;
    else if (c === '(' && pattern[i + 1] === '?') {
      const look = /^\(\?(<?[=!])/.exec(pattern.slice(i, i + 4));
      if (look) return `uses a lookaround ((?${look[1]}…), which a linear-time regex engine cannot run`;
    } else if (c === '{') {
      const rep = /^\{(\d+)(?:,(\d*))?\}/.exec(pattern.slice(i));
      if (rep && [rep[1], rep[2]].some((n) => n !== undefined && n !== '' && Number(n) > MAX_PATTERN_REPEAT)) return `has a repetition bound over ${MAX_PATTERN_REPEAT} (${rep[0]})`;
    }
  }
  try {
    re2Engine(pattern);
  } catch (err) {
    return `is not a regular expression a linear-time engine can run (${(err as Error).message.replace(/^error parsing regexp: /, '').slice(0, 200)})`;
  }
  return null;
}

export type Draft = '2020-12' | '07';

/** An ajv instance for a draft: formats, caller patterns on RE2. The same options on both threads. */
export function makeAjv(draft: Draft) {
  // strict: false: unknown keywords (`x-…`, vendor annotations) are ignored, as JSON Schema says, instead of refused.
  const opts = { allErrors: true, strict: false, validateFormats: true, code: { regExp: re2Engine } } as const;
  const ajv = draft === '2020-12' ? new Ajv2020(opts) : new Ajv07(opts);
  addFormats(ajv);
  return ajv;
}

/** ajv's errors as short lines ("/total: must be number"), for the repair turn and for logs. */
export function describeErrors(errors: ErrorObject[] | null | undefined, max = 20): string[] {
  return (errors ?? []).slice(0, max).map((e) => {
    const extra = e.keyword === 'additionalProperties' ? ` ('${(e.params as { additionalProperty?: string }).additionalProperty}')` : e.keyword === 'enum' ? ` (${JSON.stringify((e.params as { allowedValues?: unknown }).allowedValues)})` : '';
    return `${e.instancePath || '/'}: ${e.message ?? e.keyword}${extra}`;
  });
}
