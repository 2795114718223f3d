import { chunkText, mergePartials, support } from '../../domain/extraction/merge';
import { compileUserSchema, isStrictCompatible, parseUserSchema } from '../../domain/extraction/schema';
import { ApiError, asApiError } from '../../api/http-errors';

const refusal = (f: () => unknown): { status: number; code: string; message: string } => {
  try {
    f();
  } catch (thrown) {
    const err = asApiError(thrown);
    if (err instanceof ApiError) return { status: err.status, code: err.code, message: err.message };
    throw err;
  }
  throw new Error('not refused');
};

describe('the caller’s JSON Schema', () => {
  test('draft 2020-12 by default, draft-07 by its $schema, each validated with its own rules and formats', () => {
    const s2020 = parseUserSchema(JSON.stringify({ type: 'object', properties: { when: { type: 'string', format: 'date-time' }, tags: { type: 'array', prefixItems: [{ type: 'string' }] } } }));
    expect(s2020.draft).toBe('2020-12');
    expect(s2020.validate({ when: '2026-01-01T10:00:00Z', tags: ['a'] })).toBe(true);
    expect(s2020.validate({ when: 'yesterday' })).toBe(false);
    expect(s2020.validate({ tags: [1] })).toBe(false);
    const s07 = parseUserSchema(JSON.stringify({ $schema: 'http://json-schema.org/draft-07/schema#', type: 'object', properties: { email: { type: 'string', format: 'email' } }, definitions: { x: { type: 'string' } } }));
    expect(s07.draft).toBe('07');
    expect(s07.validate({ email: 'a@example.com' })).toBe(true);
    expect(s07.validate({ email: 'not an email' })).toBe(false);
  });

  test('local, non-recursive $ref is honoured; the same schema in another key order has the same hash', () => {
    const a = compileUserSchema({ type: 'object', properties: { a: { $ref: '#/$defs/money' }, b: { $ref: '#/$defs/money' } }, $defs: { money: { type: 'number', minimum: 0 } } });
    expect(a.validate({ a: 1, b: 2 })).toBe(true);
    expect(a.validate({ a: -1 })).toBe(false);
    const b = compileUserSchema({ $defs: { money: { minimum: 0, type: 'number' } }, properties: { b: { $ref: '#/$defs/money' }, a: { $ref: '#/$defs/money' } }, type: 'object' });
    expect(b.hash).toBe(a.hash);
  });

  test('a root $id does not break a second compile of the same schema', () => {
    const s = { $id: 'https://example.com/invoice', type: 'object', properties: { n: { type: 'string' } } };
    expect(compileUserSchema(s).validate({ n: 'x' })).toBe(true);
    expect(compileUserSchema({ ...s, properties: { n: { type: 'integer' } } }).validate({ n: 1 })).toBe(true);
  });

  test('refusals are 400 bad_schema with the reason', () => {
    expect(refusal(() => parseUserSchema(undefined))).toMatchObject({ status: 400, code: 'missing_schema' });
    expect(refusal(() => compileUserSchema({ type: 'object', properties: { a: { $ref: 'other.json#/x' } } }))).toMatchObject({ code: 'bad_schema', message: expect.stringMatching(/outside the schema/) });
    expect(refusal(() => compileUserSchema({ type: 'object', properties: { self: { $ref: '#' } } }))).toMatchObject({ code: 'bad_schema', message: expect.stringMatching(/recursive/) });
  });

  test('caller patterns run on RE2: lookarounds and back-references refused naming the keyword, escaped look-alikes accepted, each pattern its own', () => {
    const withPattern = (pattern: string) => ({ type: 'object', properties: { c: { type: 'string', pattern } } });
    expect(refusal(() => compileUserSchema(withPattern('^(a+)+(?!)$')))).toMatchObject({ code: 'bad_schema', message: expect.stringMatching(/^schema: pattern .*lookaround/) });
    expect(refusal(() => compileUserSchema(withPattern('(?<n>a)\\k<n>')))).toMatchObject({ code: 'bad_schema', message: expect.stringMatching(/back-reference/) });
    // `\(?=` is a literal parenthesis and `[(?=]` a class: no lookaround there.
    expect(compileUserSchema(withPattern('^\\(?=x[(?=]$')).validate({ c: '(=x?' })).toBe(true);
    const slow = compileUserSchema(withPattern('^(a+)+$'));
    const started = Date.now();
    expect(slow.validate({ c: `${'a'.repeat(5_000)}!` })).toBe(false);
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(compileUserSchema(withPattern('^[0-9]+$')).validate({ c: 'aaa' })).toBe(false);
  });

  test('strict mode is asked for only when every object lists all its properties as required and allows no others', () => {
    expect(isStrictCompatible({ type: 'object', properties: { a: { type: 'string' } }, required: ['a'], additionalProperties: false })).toBe(true);
    expect(isStrictCompatible({ type: 'object', properties: { a: { type: 'string' } }, required: [], additionalProperties: false })).toBe(false);
    expect(isStrictCompatible({ type: 'object', properties: { a: { type: 'object', properties: { b: { type: 'string' } } } }, required: ['a'], additionalProperties: false })).toBe(false);
  });
});

describe('merging the answers of a long document’s chunks', () => {
  test('support: a value found in the chunk’s text beats one that is not, which beats the “not stated” fallbacks', () => {
    expect(support('INV-7', 'Invoice inv-7 of March')).toBe(3);
    expect(support('INV-8', 'Invoice inv-7 of March')).toBe(1);
    expect(support(9.99, 'costs 19.99')).toBe(1);
    expect(support(9.99, 'costs 9.99 each')).toBe(3);
    expect(support(1200, 'total 1,200.00')).toBe(3);
    expect(support(0, 'anything')).toBe(0.5);
    expect(support('', 'anything')).toBe(0);
  });

  test('arrays are concatenated (an item two chunks both give kept once), objects merged key by key, scalars from the supporting chunk', () => {
    const merged = mergePartials(
      [
        { data: { number: 'INV-1', total: 0, lines: [{ sku: 'A' }], meta: { currency: 'EUR', page: 1 } }, text: 'Invoice INV-1, currency EUR' },
        { data: { number: '', total: 30.5, lines: [{ sku: 'A' }, { sku: 'B' }], meta: { currency: '', page: 2 } }, text: 'Total 30.50' },
      ],
      () => true,
    );
    expect(merged).toEqual({ data: { number: 'INV-1', total: 30.5, lines: [{ sku: 'A' }, { sku: 'B' }], meta: { currency: 'EUR', page: 1 } }, merged: true });
  });

  test('a merge the schema refuses falls back to the best single chunk’s answer', () => {
    const valid = (d: unknown) => ((d as { lines: unknown[] }).lines.length <= 1);
    const merged = mergePartials(
      [
        { data: { lines: ['x'] }, text: 'nothing here' },
        { data: { lines: ['y'] }, text: 'y is stated here' },
      ],
      valid,
    );
    expect(merged).toEqual({ data: { lines: ['y'] }, merged: false });
  });

  test('chunks are cut at paragraph breaks, never longer than the limit, and cover the whole text', () => {
    const text = ['a'.repeat(40), 'b'.repeat(40), 'c'.repeat(70)].join('\n\n');
    const chunks = chunkText(text, 60);
    expect(chunks.every((c) => c.length <= 60)).toBe(true);
    expect(chunks.join('').replace(/\s/g, '')).toBe(text.replace(/\s/g, ''));
    expect(chunks[0]).toBe('a'.repeat(40));
  });
});
