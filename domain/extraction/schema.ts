import { createHash } from 'node:crypto';
import type { ValidateFunction } from 'ajv';
import { DomainError } from '../errors';
import { makeAjv, regexProblem, type Draft } from './regex';

export { describeErrors, type Draft } from './regex';

/**
 * The caller's JSON Schema for structured extraction: parsed, checked against what we can
 * honour, and compiled with ajv (drafts 2020-12 and 07, with ajv-formats' formats). Every
 * `data` the service returns has passed `validate` of this module first.
 */

/** Largest schema accepted, in bytes of its JSON text. */
export const MAX_SCHEMA_BYTES = 64 * 1024;
/** Most subschemas (objects anywhere in the tree) a schema may have. */
export const MAX_SCHEMA_NODES = 2_000;
/** Deepest nesting of the schema's JSON. */
export const MAX_SCHEMA_DEPTH = 32;

const DRAFT_2020 = 'https://json-schema.org/draft/2020-12/schema';
const DRAFT_07 = 'http://json-schema.org/draft-07/schema';

export interface UserSchema {
  /** The schema as the caller sent it (parsed). */
  schema: Record<string, unknown>;
  draft: Draft;
  /** SHA-256 of the schema's canonical JSON (keys sorted): the same schema, whatever its key order, has the same hash. */
  hash: string;
  validate: ValidateFunction;
  /** Whether OpenAI's strict structured outputs can take the schema as it is (see isStrictCompatible). */
  strict: boolean;
}

const badSchema = (reason: string) => new DomainError('bad_schema', `schema: ${reason}`);

/** One ajv instance per draft (./regex.ts: formats, patterns on RE2); compiled validators cached by the schema's hash. */
const ajvs: Record<Draft, ReturnType<typeof makeAjv>> = { '2020-12': makeAjv('2020-12'), '07': makeAjv('07') };
const compiled = new Map<string, ValidateFunction>();
const MAX_CACHED = 500;

/** JSON with object keys sorted at every level: a stable text to hash. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function draftOf(schema: Record<string, unknown>): Draft {
  const declared = schema.$schema;
  if (declared === undefined) return '2020-12';
  if (typeof declared !== 'string') throw badSchema('$schema must be a string');
  const uri = declared.replace(/#$/, '');
  if (uri === DRAFT_2020) return '2020-12';
  if (uri === DRAFT_07 || uri === DRAFT_07.replace('http:', 'https:')) return '07';
  throw badSchema(`$schema '${declared}' is not supported (use draft 2020-12 or draft-07)`);
}

/**
 * The caller's regular expressions (`pattern`, the keys of `patternProperties`, and a
 * `pattern` inside `propertyNames`) must be runnable by RE2 and within our caps
 * (./regex.ts); the message names the keyword and where it is.
 */
function checkPatterns(node: Record<string, unknown>, path: string[]): void {
  const keyword = path.includes('propertyNames') ? 'propertyNames' : 'pattern';
  if (typeof node.pattern === 'string') {
    const why = regexProblem(node.pattern);
    if (why) throw new DomainError('bad_schema', `schema: ${keyword} at /${[...path, 'pattern'].join('/')} ${why}`);
  }
  if (isObject(node.patternProperties)) {
    for (const key of Object.keys(node.patternProperties)) {
      const why = regexProblem(key);
      if (why) throw new DomainError('bad_schema', `schema: patternProperties key ${JSON.stringify(key.slice(0, 80))} at /${[...path, 'patternProperties'].join('/')} ${why}`);
    }
  }
}

/**
 * Refusals ajv would not give, or not clearly: size and depth limits, `$ref` to anything
 * but this document (we never fetch), dynamic references, and recursion (a `$ref` to one
 * of its own ancestors: the model could be asked for an unbounded tree).
 */
function checkShape(schema: Record<string, unknown>): void {
  let nodes = 0;
  const refs: Array<{ ref: string; path: string[] }> = [];
  const walk = (node: unknown, path: string[], depth: number) => {
    if (depth > MAX_SCHEMA_DEPTH) throw badSchema(`nested deeper than ${MAX_SCHEMA_DEPTH} levels`);
    if (Array.isArray(node)) {
      node.forEach((v, i) => walk(v, [...path, String(i)], depth + 1));
      return;
    }
    if (!isObject(node)) return;
    if (++nodes > MAX_SCHEMA_NODES) throw badSchema(`more than ${MAX_SCHEMA_NODES} subschemas`);
    for (const key of ['$dynamicRef', '$recursiveRef', '$dynamicAnchor', '$recursiveAnchor']) {
      if (key in node) throw badSchema(`${key} is not supported (recursive schemas cannot be honoured)`);
    }
    if ('$ref' in node) {
      const ref = node.$ref;
      if (typeof ref !== 'string') throw badSchema(`$ref at /${path.join('/')} must be a string`);
      if (!ref.startsWith('#')) throw badSchema(`$ref '${ref}' points outside the schema; only local references ('#/$defs/…') are supported, nothing is fetched`);
      refs.push({ ref, path });
    }
    if ('$id' in node && path.length > 0) throw badSchema('$id is only supported at the root');
    checkPatterns(node, path);
    // `enum` and `const` values are data, not subschemas: counted as nodes only by size.
    for (const [k, v] of Object.entries(node)) {
      if (k === 'enum' || k === 'const' || k === 'examples' || k === 'default') continue;
      walk(v, [...path, k], depth + 1);
    }
  };
  walk(schema, [], 0);

  // Recursion: following $ref from any subschema must never come back to a subschema it
  // is inside of. Pointers are resolved within this document only.
  const pointerOf = (ref: string) =>
    ref === '#'
      ? []
      : ref
          .replace(/^#\/?/, '')
          .split('/')
          .map((s) => decodeURIComponent(s).replace(/~1/g, '/').replace(/~0/g, '~'));
  const isPrefix = (a: string[], b: string[]) => a.length <= b.length && a.every((s, i) => s === b[i]);
  const targetRefs = (target: string[]) => refs.filter((r) => isPrefix(target, r.path));
  for (const start of refs) {
    if (!/^#(\/|$)/.test(start.ref)) throw badSchema(`$ref '${start.ref}': only JSON-pointer references ('#/$defs/name') are supported`);
    const seen = new Set<string>();
    const stack: Array<{ target: string[]; ancestors: string[][] }> = [{ target: pointerOf(start.ref), ancestors: [start.path] }];
    while (stack.length) {
      const { target, ancestors } = stack.pop()!;
      if (ancestors.some((a) => isPrefix(target, a))) throw badSchema(`$ref '${start.ref}' is recursive; recursive schemas cannot be honoured`);
      const key = target.join('/');
      if (seen.has(key)) continue;
      seen.add(key);
      for (const inner of targetRefs(target)) stack.push({ target: pointerOf(inner.ref), ancestors: [...ancestors, inner.path] });
    }
  }
}

/**
 * Obvious contradictions that no value can satisfy, found without solving the schema: a
 * `false` schema where a value is required, an empty `enum`, bounds the wrong way round.
 * Anything subtler reaches the model and ends in 422 extraction_failed.
 */
function unsatisfiable(node: unknown, path: string): string | null {
  if (node === false) return `${path || '/'} is the schema false, which no value satisfies`;
  if (!isObject(node)) return null;
  const at = path || '/';
  if (isObject(node.not) && Object.keys(node.not).length === 0) return `${at} has "not": {}, which no value satisfies`;
  if (node.not === true) return `${at} has "not": true, which no value satisfies`;
  if (Array.isArray(node.enum) && node.enum.length === 0) return `${at} has an empty enum`;
  const pairs: Array<[string, string]> = [
    ['minimum', 'maximum'],
    ['minLength', 'maxLength'],
    ['minItems', 'maxItems'],
    ['minProperties', 'maxProperties'],
  ];
  for (const [lo, hi] of pairs) {
    if (typeof node[lo] === 'number' && typeof node[hi] === 'number' && (node[lo] as number) > (node[hi] as number)) return `${at} has ${lo} greater than ${hi}`;
  }
  if (isObject(node.properties) && Array.isArray(node.required)) {
    for (const name of node.required) {
      if (typeof name !== 'string') continue;
      const sub = (node.properties as Record<string, unknown>)[name];
      if (sub !== undefined) {
        const why = unsatisfiable(sub, `${path}/properties/${name}`);
        if (why) return why;
      } else if (node.additionalProperties === false) return `${at} requires '${name}' but allows no such property`;
    }
  }
  return null;
}

/**
 * Whether OpenAI's strict mode accepts the schema as it is: every object lists all its
 * properties in `required` and has `additionalProperties: false`. Otherwise the request
 * says strict: false, the server still constrains what it can, and ajv decides.
 */
export function isStrictCompatible(node: unknown): boolean {
  if (Array.isArray(node)) return node.every(isStrictCompatible);
  if (!isObject(node)) return true;
  const types = Array.isArray(node.type) ? node.type : [node.type];
  if (types.includes('object') || isObject(node.properties)) {
    const props = isObject(node.properties) ? Object.keys(node.properties) : [];
    const required = Array.isArray(node.required) ? node.required : [];
    if (node.additionalProperties !== false || props.some((p) => !required.includes(p))) return false;
  }
  return Object.entries(node).every(([k, v]) => k === 'enum' || k === 'const' || k === 'default' || k === 'examples' || isStrictCompatible(v));
}

/** Parses and compiles the `schema` field; 400 missing_schema or bad_schema (with the reason) when it cannot be honoured. */
export function parseUserSchema(text: string | undefined): UserSchema {
  if (text === undefined || text.trim() === '') throw new DomainError('missing_schema', 'schema: required (a JSON Schema serialised as a JSON string)');
  if (Buffer.byteLength(text) > MAX_SCHEMA_BYTES) throw badSchema(`larger than ${MAX_SCHEMA_BYTES / 1024} KB`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw badSchema(`not valid JSON (${(err as Error).message})`);
  }
  return compileUserSchema(parsed);
}

export function compileUserSchema(parsed: unknown): UserSchema {
  if (!isObject(parsed)) throw badSchema('must be a JSON object');
  const draft = draftOf(parsed);
  checkShape(parsed);
  // The answer is a JSON object (docs/decisions.md "Structured extraction"): model servers' json_schema mode requires an object at the root.
  if (parsed.type !== 'object') throw badSchema('the root must have "type": "object"');
  const why = unsatisfiable(parsed, '');
  if (why) throw badSchema(`unsatisfiable: ${why}`);
  const hash = createHash('sha256').update(`${draft}\n${canonicalJson(parsed)}`).digest('hex');
  let validate = compiled.get(hash);
  if (!validate) {
    try {
      // A schema with a root $id would be registered under it and clash on a second compile: compile a copy without it.
      const { $id: _id, ...rest } = parsed;
      validate = ajvs[draft].compile(rest);
    } catch (err) {
      throw badSchema(`not a valid JSON Schema (${(err as Error).message.slice(0, 300)})`);
    }
    if (compiled.size >= MAX_CACHED) compiled.delete(compiled.keys().next().value!);
    compiled.set(hash, validate);
  }
  return { schema: parsed, draft, hash, validate, strict: isStrictCompatible(parsed) };
}
