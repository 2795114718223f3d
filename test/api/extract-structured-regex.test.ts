import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { startFakeLlm, type FakeLlm, type FakeLlmReply } from '../../dev/fakes/fake-llm';
import { multipart } from '../support/kb';
import { startTestWorker, type TestWorker } from '../support/temporal';

/**
 * Callers' regular expressions in extraction schemas (docs/security.md, "What a caller makes us run is bounded"): the
 * report's ReDoS (`^(a+)+(?!)$` against a run of a's copied by the model) is refused up
 * front; a pattern RE2 runs but V8 would backtrack on no longer stops the process; and
 * validation past its deadline ends in 422 extraction_failed with its thread terminated.
 */
let db: TestDatabase;
let llm: FakeLlm;
let tw: TestWorker;
let twHurried: TestWorker;
let t: TestApp;
let hurried: TestApp;
let auth: Record<string, string>;

let respond: (body: any, index: number) => FakeLlmReply = () => ({ text: '{}' });

beforeAll(async () => {
  llm = await startFakeLlm({ reply: (body, i) => respond(body, i) });
  db = await createTestDatabase();
  const structured = { llm: { baseUrl: llm.url, model: 'fake-extractor' }, chunkChars: 4_000, maxChunks: 2 };
  tw = await startTestWorker(db, { structured });
  // A worker whose validations have a 1 ms deadline: every one runs past it.
  twHurried = await startTestWorker(db, { structured: { ...structured, validationTimeoutMs: 1 } });
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url, temporal: { client: tw.client, taskQueue: tw.taskQueue, eagerStart: true }, serviceOptions: { structured } });
  hurried = await startTestApp({ orm: db.orm, databaseUrl: db.url, temporal: { client: twHurried.client, taskQueue: twHurried.taskQueue, eagerStart: true }, serviceOptions: { structured } });
  const ws = await createWorkspace(db.orm);
  // documents:extract only, as in the report.
  auth = bearer((await createKey(t.services, ws, ['documents:extract'])).key);
}, 60_000);

afterAll(async () => {
  for (const a of [t, hurried]) await a?.close();
  for (const w of [tw, twHurried]) await w?.close();
  await db?.drop();
  await llm?.close();
});

let n = 0;
function extract(text: string, schema: unknown, app: TestApp = t) {
  const body = multipart([
    { name: 'schema', value: JSON.stringify(schema) },
    { name: 'file', value: `${text}\nrun ${++n} ${Date.now()}\n`, filename: 'note.txt' },
  ]);
  return app.app.inject({ method: 'POST', url: '/api/v1/documents/extract_structured', headers: { ...auth, ...body.headers }, payload: body.payload });
}

const codeSchema = (code: Record<string, unknown>) => ({ type: 'object', properties: { code: { type: 'string', ...code } }, required: ['code'] });

describe('patterns a linear-time engine cannot run are refused before any model call', () => {
  test.each([
    ['pattern (the report’s attack)', codeSchema({ pattern: '^(a+)+(?!)$' }), /^schema: pattern at \/properties\/code\/pattern uses a lookaround/],
    ['pattern with a back-reference', codeSchema({ pattern: '^(a+)\\1$' }), /^schema: pattern at .* uses a back-reference/],
    ['patternProperties', { type: 'object', patternProperties: { '^(?<=x)a+$': { type: 'string' } } }, /^schema: patternProperties key .* uses a lookaround/],
    ['propertyNames', { type: 'object', propertyNames: { pattern: '^(a+)+(?=b)$' } }, /^schema: propertyNames at \/propertyNames\/pattern uses a lookaround/],
    ['a repetition bound over the cap', codeSchema({ pattern: '^a{1,5000}$' }), /^schema: pattern at .* repetition bound over 256/],
    ['a pattern over the length cap', codeSchema({ pattern: `^(${'ab|'.repeat(300)}c)$` }), /^schema: pattern at .* longer than 512 characters/],
  ])('400 bad_schema naming the keyword: %s', async (_what, schema, message) => {
    const before = llm.requests.length;
    const started = Date.now();
    const res = await extract(`Reference code: ${'a'.repeat(29)}`, schema);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: 'bad_schema', message: expect.stringMatching(message) });
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(llm.requests.length).toBe(before);
  });
});

describe('validation runs on RE2, in a thread, with a deadline', () => {
  test('a pattern V8 backtracks on exponentially (^(a+)+$ against 30 a’s and a !) is validated at once and /healthz keeps answering', async () => {
    const run = `${'a'.repeat(30)}!`;
    // The model copies the run (as llama.cpp did); the repair turn gives a valid code.
    respond = (_body, i) => ({ text: JSON.stringify({ code: i % 2 === 0 ? run : 'aaaa' }) });
    const before = llm.requests.length;
    let slowest = 0;
    let done = false;
    const probe = (async () => {
      while (!done) {
        const at = Date.now();
        const health = await t.app.inject({ method: 'GET', url: '/healthz' });
        expect(health.statusCode).toBe(200);
        slowest = Math.max(slowest, Date.now() - at);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    const started = Date.now();
    const res = await extract(`Reference code: ${run}`, codeSchema({ pattern: '^(a+)+$' }));
    done = true;
    await probe;
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toEqual({ code: 'aaaa' });
    // The first answer was refused by the pattern (a repair turn followed), not let through.
    expect(llm.requests.length - before).toBe(2);
    expect(llm.requests.at(-1)!.body.messages.at(-1).content).toMatch(/must match pattern/);
    expect(slowest).toBeLessThan(500);
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  test('each schema’s pattern is its own: two schemas with different patterns do not share a compiled pattern', async () => {
    respond = () => ({ text: JSON.stringify({ code: 'B-7' }) });
    const digits = await extract('Code B-7', codeSchema({ pattern: '^[0-9]+$' }));
    expect(digits.statusCode).toBe(422);
    const letters = await extract('Code B-7', codeSchema({ pattern: '^[A-Z]-[0-9]$' }));
    expect(letters.statusCode).toBe(200);
    expect(letters.json().data).toEqual({ code: 'B-7' });
  });

  test('validation past its deadline: 422 extraction_failed, and the validation thread is terminated', async () => {
    respond = () => ({ text: JSON.stringify({ codes: Array.from({ length: 20_000 }, (_, i) => `code-${i}`) }) });
    const schema = { type: 'object', properties: { codes: { type: 'array', items: { type: 'string', pattern: '^code-[0-9]+$' } } }, required: ['codes'] };
    const res = await extract('Codes: many', schema, hurried);
    expect(res.statusCode).toBe(422);
    expect(res.json()).toEqual({ error: 'extraction_failed', message: expect.stringMatching(/validating the model's answer against the schema took longer than 1 ms/) });
    expect(twHurried.composition.services.structured.validator.liveThreads).toBe(0);
  });
});
