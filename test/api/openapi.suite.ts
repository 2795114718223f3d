import { compileErrors, validate } from '@readme/openapi-parser';
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import type { OpenAPIV3_1 } from 'openapi-types';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';

let db: TestDatabase;
let t: TestApp;
let doc: OpenAPIV3_1.Document;

beforeAll(async () => {
  db = await createTestDatabase();
  // The installation's model policy is part of the document (agent specs): one allowed model, a cap of 1,000 tokens.
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url, serviceOptions: { llm: { baseUrl: 'http://127.0.0.1:9', model: 'house-model' }, models: { allowed: ['extra-model'], maxTokensCap: 1_000 } } });
  const res = await t.app.inject({ method: 'GET', url: '/api/v1/openapi.json' });
  expect(res.statusCode).toBe(200);
  doc = res.json();
});
afterAll(async () => {
  await t.close();
  await db.drop();
});

const operations = () =>
  Object.entries(doc.paths ?? {}).flatMap(([path, item]) =>
    Object.entries(item as Record<string, OpenAPIV3_1.OperationObject>)
      .filter(([method]) => ['get', 'post', 'put', 'patch', 'delete'].includes(method))
      .map(([method, op]) => ({ path, method, op: op as OpenAPIV3_1.OperationObject & { 'x-required-scope'?: string } })),
  );

describe('GET /api/v1/openapi.json', () => {
  test('is a valid OpenAPI 3.1 document (external validator)', async () => {
    expect(doc.openapi).toBe('3.1.0');
    const result = await validate(structuredClone(doc) as never);
    if (!result.valid) throw new Error(compileErrors(result));
    expect(result.valid).toBe(true);
  });

  test('describes every API route, each with operationId, bearer security and its scope', async () => {
    const ops = operations();
    const documented = new Set(ops.map((o) => `${o.method.toUpperCase()} ${o.path}`));
    const routes = t.app.routeTable.filter((r) => (r.url.startsWith('/api/v1/') || r.url.startsWith('/api/public/') || r.url.startsWith('/api/console/')) && r.url !== '/api/v1/openapi.json' && r.method !== 'HEAD');
    for (const r of routes) expect(documented).toContain(`${r.method} ${r.url.replace(/:(\w+)/g, '{$1}')}`);
    const ids = new Set<string>();
    for (const { op, path, method } of ops) {
      expect({ at: `${method} ${path}`, operationId: typeof op.operationId }).toEqual({ at: `${method} ${path}`, operationId: 'string' });
      ids.add(op.operationId!);
      const route = t.app.routeTable.find((r) => r.method === method.toUpperCase() && r.url.replace(/:(\w+)/g, '{$1}') === path);
      if (path === '/api/chat/connect' || path === '/api/voice/rtc') {
        // The reply socket authenticates itself (site, Origin, conversation in the query); the voice signalling socket by its room token's first frame.
        expect(op.security).toEqual([]);
        continue;
      }
      if (route?.site) {
        expect(op.security).toEqual([{ widgetSite: [] }]);
        continue;
      }
      // The console's session: GETs with the cookie alone, unsafe methods with the CSRF token too.
      const session = method === 'get' ? { consoleSession: [] } : { consoleSession: [], consoleCsrf: [] };
      if (route?.console === 'public') {
        expect({ at: `${method} ${path}`, security: op.security }).toEqual({ at: `${method} ${path}`, security: [] });
        continue;
      }
      if (route?.console === 'session') {
        expect({ at: `${method} ${path}`, security: op.security }).toEqual({ at: `${method} ${path}`, security: [session] });
        continue;
      }
      expect(op.security).toEqual([{ bearerApiKey: [] }, session]);
      expect(op['x-required-scope']).toBe(route?.scope);
    }
    expect(ids.size).toBe(ops.length);
    expect(doc.components?.securitySchemes?.bearerApiKey).toMatchObject({ type: 'http', scheme: 'bearer' });
  });

  test('is generated from the zod schemas that validate requests', () => {
    const create = (doc.paths?.['/api/v1/kb/folders'] as OpenAPIV3_1.PathItemObject).post!;
    const body = (create.requestBody as OpenAPIV3_1.RequestBodyObject).content['application/json'].schema as OpenAPIV3_1.SchemaObject;
    expect(body.required).toEqual(['name']);
    expect(body.properties?.name).toMatchObject({ type: 'string', minLength: 1, maxLength: 200 });
    expect(Object.keys(create.responses ?? {})).toEqual(expect.arrayContaining(['201', '400', '401', '403', '404', '409', '429']));
  });
});

describe('webhook payloads in the OpenAPI document', () => {
  test('every event type is described under webhooks, with the delivery headers', () => {
    const hooks = (doc as { webhooks?: Record<string, OpenAPIV3_1.PathItemObject> }).webhooks ?? {};
    expect(Object.keys(hooks).sort()).toEqual(['message.inbound', 'message.status', 'webhook.test']);
    const status = hooks['message.status'].post!;
    expect((status.parameters as OpenAPIV3_1.ParameterObject[]).map((p) => p.name)).toEqual(['X-Concierge-Signature', 'X-Concierge-Event', 'X-Concierge-Delivery']);
    const schema = (status.requestBody as OpenAPIV3_1.RequestBodyObject).content['application/json'].schema as OpenAPIV3_1.SchemaObject;
    expect(schema.required).toEqual(['id', 'event', 'created_at', 'data']);
  });
});

describe('the document is exact enough for generated clients and fuzzers', () => {
  const param = (path: string, method: string, name: string) =>
    ((doc.paths?.[path] as Record<string, OpenAPIV3_1.OperationObject>)[method].parameters as OpenAPIV3_1.ParameterObject[]).find((p) => p.name === name)!;

  test('every operation documents the statuses any route can answer: 400 and 500; 404 with path ids; 413 and 415 with a body', () => {
    for (const { path, method, op } of operations()) {
      const statuses = Object.keys(op.responses ?? {});
      const at = `${method.toUpperCase()} ${path}`;
      expect({ at, statuses }).toEqual({ at, statuses: expect.arrayContaining(['400', '500']) });
      if (path.includes('{')) expect({ at, statuses }).toEqual({ at, statuses: expect.arrayContaining(['404']) });
      if (op.requestBody) expect({ at, statuses }).toEqual({ at, statuses: expect.arrayContaining(['413', '415']) });
    }
  });

  test('id and cursor parameters carry their real patterns', () => {
    expect(param('/api/v1/agents/{id}', 'get', 'id').schema).toMatchObject({ type: 'string', pattern: '^agt_[0-9a-f]{24}$' });
    expect(param('/api/v1/kb/folders/{id}', 'patch', 'id').schema).toMatchObject({ pattern: '^fld_[0-9a-f]{24}$' });
    expect(param('/api/v1/webhook-subscriptions/{id}/deliveries/{delivery_id}', 'get', 'delivery_id').schema).toMatchObject({ pattern: '^dlv_[0-9a-f]{24}$' });
    for (const path of ['/api/v1/agents', '/api/v1/kb/files', '/api/v1/messages', '/api/v1/customers', '/api/v1/conversations']) {
      expect({ path, schema: param(path, 'get', 'cursor').schema }).toEqual({ path, schema: expect.objectContaining({ pattern: expect.any(String) }) });
    }
  });

  test('a cursor matching the documented pattern is never refused, and real cursors match it', async () => {
    const ws = await createWorkspace(db.orm);
    const auth = bearer((await createKey(t.services, ws, ['workflows:read', 'workflows:write'])).key);
    for (const name of ['a', 'b']) await t.app.inject({ method: 'POST', url: '/api/v1/agents', headers: auth, payload: { name } });
    const first = await t.app.inject({ method: 'GET', url: '/api/v1/agents?limit=1', headers: auth });
    const pattern = new RegExp((param('/api/v1/agents', 'get', 'cursor').schema as OpenAPIV3_1.SchemaObject).pattern!);
    expect(first.json().next_cursor).toMatch(pattern);
    const second = await t.app.inject({ method: 'GET', url: `/api/v1/agents?limit=1&cursor=${first.json().next_cursor}`, headers: auth });
    expect(second.json().agents.map((a: { name: string }) => a.name)).toEqual(['a']);
    for (const cursor of ['0.x', '99999999999999.zz', '1764000000000.agt_0a1b2c3d4e5f60718293a4b5']) {
      expect(cursor).toMatch(pattern);
      const res = await t.app.inject({ method: 'GET', url: `/api/v1/agents?cursor=${cursor}`, headers: auth });
      expect({ cursor, status: res.statusCode }).toEqual({ cursor, status: 200 });
    }
    const refused = await t.app.inject({ method: 'GET', url: '/api/v1/agents?cursor=not-a-cursor', headers: auth });
    expect(refused.statusCode).toBe(400);
    expect(refused.json().message).toMatch(/^querystring\.cursor: /);
  });

  test('the reply socket is documented: query credentials, the 101 upgrade with its frames, its refusals', () => {
    const op = (doc.paths?.['/api/chat/connect'] as OpenAPIV3_1.PathItemObject).get!;
    expect(op.operationId).toBe('chatConnect');
    expect((op.parameters as OpenAPIV3_1.ParameterObject[]).filter((p) => p.required).map((p) => p.name).sort()).toEqual(['conversation_id', 'site_id']);
    expect(Object.keys(op.responses ?? {})).toEqual(expect.arrayContaining(['101', '400', '403', '426', '503']));
    const upgrade = op.responses!['101'] as OpenAPIV3_1.ResponseObject;
    expect(upgrade.content?.['application/json'].schema).toEqual({ $ref: '#/components/schemas/ChatFrame' });
    const frame = doc.components?.schemas?.ChatFrame as { oneOf?: Array<{ properties: { type: { const: string } } }>; anyOf?: Array<{ properties: { type: { const: string } } }> };
    const types = (frame.oneOf ?? frame.anyOf ?? []).map((f) => f.properties.type.const).sort();
    expect(types).toEqual(['error', 'handoff', 'ping', 'reply', 'reply_delta', 'suggested_actions', 'task_status', 'ui:command', 'visitor_message']);
  });
});

describe('the document states what the server requires of a request, and the server agrees', () => {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  /** Whether a body or parameter value is valid by the served document (Ajv, JSON Schema 2020-12, formats checked). */
  const docAccepts = (schema: unknown, value: unknown) => ajv.validate({ ...(schema as object), components: doc.components }, value);
  const bodySchema = (path: string, method: string) =>
    ((doc.paths?.[path] as Record<string, OpenAPIV3_1.OperationObject>)[method].requestBody as OpenAPIV3_1.RequestBodyObject).content['application/json'].schema;
  const paramSchema = (path: string, method: string, name: string) =>
    ((doc.paths?.[path] as Record<string, OpenAPIV3_1.OperationObject>)[method].parameters as OpenAPIV3_1.ParameterObject[]).find((p) => p.name === name)!.schema;
  let auth: Record<string, string>;
  beforeAll(async () => {
    const ws = await createWorkspace(db.orm);
    auth = bearer(
      (await createKey(t.services, ws, ['workflows:write', 'customers:write', 'customers:read', 'kb:read', 'kb:write', 'conversations:write', 'webhooks:write', 'support:write', 'credentials:write'])).key,
    );
  });

  const nul = 'a\u0000b';
  // [method, path, body, valid by the document]: each refused one is refused by the server with 400; each valid one is not.
  // Ids that name nothing make a valid body answer 404 (or create a resource), never 400.
  const bodies: Array<[string, string, string, Record<string, unknown>, boolean]> = [
    ['at least one field', 'PATCH', '/api/v1/customers/{id}', {}, false],
    ['at least one field', 'PATCH', '/api/v1/agents/{id}', {}, false],
    ['at least one field', 'PATCH', '/api/v1/webhook-subscriptions/{id}', {}, false],
    ['a patched spec field has its AgentSpec schema', 'PATCH', '/api/v1/agents/{id}', { actions: null }, false],
    ['a patched spec field has its AgentSpec schema', 'PATCH', '/api/v1/agents/{id}', { actions: [{ type: 'handoff' }] }, true],
    ['at least one identity', 'POST', '/api/v1/customer/link', {}, false],
    ['at least one identity', 'POST', '/api/v1/customer/link', { customer_id: 'cus_000000000000000000000000' }, false],
    ['at least one identity', 'POST', '/api/v1/customer/link', { email: 'a@b.co', customer_id: 'cus_000000000000000000000000' }, true],
    ['case_reason only with needs_human: true', 'PATCH', '/api/v1/conversations/{id}', { needs_human: false, case_reason: 'why' }, false],
    ['case_reason only with needs_human: true', 'PATCH', '/api/v1/conversations/{id}', { needs_human: true, case_reason: 'why' }, true],
    ['send rule 1: exactly one content kind', 'POST', '/api/v1/messages', { to: '+15551230000', agent_id: 'agt_000000000000000000000000', text: 'a', location: { latitude: 1, longitude: 2 } }, false],
    ['send rule 1: exactly one content kind', 'POST', '/api/v1/messages', { to: '+15551230000', agent_id: 'agt_000000000000000000000000' }, false],
    ['from or agent_id, not both', 'POST', '/api/v1/messages', { to: '+15551230000', from: '+15551230001', agent_id: 'agt_000000000000000000000000', text: 'a' }, false],
    ['from or agent_id, not both', 'POST', '/api/v1/messages', { to: '+15551230000', text: 'a' }, false],
    ['send rule 5: no caption on audio', 'POST', '/api/v1/messages', { to: '+15551230000', agent_id: 'agt_000000000000000000000000', media: { type: 'audio', url: 'https://x.example/a.ogg', caption: 'c' } }, false],
    ['send rule 5: a filename only on a document', 'POST', '/api/v1/messages', { to: '+15551230000', agent_id: 'agt_000000000000000000000000', media: { type: 'image', url: 'https://x.example/a.png', filename: 'a.png' } }, false],
    ['send rule 5', 'POST', '/api/v1/messages', { to: '+15551230000', agent_id: 'agt_000000000000000000000000', media: { type: 'document', url: 'https://x.example/a.pdf', caption: 'c', filename: 'a.pdf' } }, true],
    ['channel is msgapp', 'POST', '/api/v1/messages', { channel: 'web', to: '+15551230000', agent_id: 'agt_000000000000000000000000', text: 'a' }, false],
    ['not blank', 'POST', '/api/v1/kb/folders', { name: ' \ufeff\u3000 ' }, false],
    ['no control characters', 'POST', '/api/v1/kb/folders', { name: 'a\u0007b' }, false],
    ['not blank', 'POST', '/api/v1/kb/search', { query: '\u2028\t' }, false],
    ['not blank', 'POST', '/api/v1/support/tickets', { subject: '  ', body: 'x' }, false],
    ['not blank', 'POST', '/api/v1/credentials', { name: 'x', provider: 'msgapp', access_token: '\u00a0' }, false],
    ['not blank, at most 200 characters before trimming', 'POST', '/api/v1/credentials', { name: `${'x'.repeat(200)} `, provider: 'msgapp', access_token: 'tok' }, false],
    ['RFC 5321 email', 'POST', '/api/v1/customers', { email: 'a@b-.co' }, false],
    // Also refused by `format: email` (RFC 5321: at most 64 characters before the @), which Ajv does not check.
    ['RFC 5321 email, local part', 'POST', '/api/v1/customers', { email: `${'a'.repeat(65)}@b.co` }, false],
    ['RFC 5321 email', 'POST', '/api/v1/customers', { email: `a@${'b'.repeat(64)}.co` }, false],
    ['RFC 5321 email', 'POST', '/api/v1/customers', { email: "o'neil+tag@mail.example.co" }, true],
    ['NUL in a string', 'POST', '/api/v1/kb/folders', { name: nul }, false],
    ['NUL in a string', 'POST', '/api/v1/customers', { name: nul }, false],
    ['NUL in a free-form key', 'POST', '/api/v1/customers', { metadata: { [nul]: 1 } }, false],
    ['msgapp is not an outbound channel', 'POST', '/api/v1/outbound', { channel: 'msgapp', conversation_id: 'conv_000000000000000000000000', text: 'x' }, false],
    ['https webhook url', 'POST', '/api/v1/webhook-subscriptions', { url: 'http://hooks.example/x', events: ['message.status'] }, false],
    ["the operator's models", 'POST', '/api/v1/agents', { name: 'A', model: { name: 'other-model' } }, false],
    ["the operator's models", 'POST', '/api/v1/agents', { name: 'A', model: { name: 'extra-model', max_tokens: 1_001 } }, false],
    ["the operator's models", 'POST', '/api/v1/agents', { name: 'A', model: { name: 'house-model', max_tokens: 1_000 } }, true],
    ["a workspace's own credential runs any model", 'POST', '/api/v1/agents', { name: 'A', model: { name: 'other-model', max_tokens: 32_000, credential_id: 'cred_000000000000000000000000' } }, true],
  ];
  test.each(bodies)('%s: %s %s %j', async (rule, method, path, body, valid) => {
    if (!rule.endsWith('local part')) expect(docAccepts(bodySchema(path, method.toLowerCase()), body)).toBe(valid);
    // The send rules' answers are tested where a workflow service runs (test/workflows/message-send.test.ts); this app has none.
    if (path === '/api/v1/messages') return;
    const url = path.replace('{id}', { customers: 'cus', agents: 'agt', 'webhook-subscriptions': 'whk', conversations: 'conv' }[path.split('/')[3]] + '_000000000000000000000000');
    const res = await t.app.inject({ method: method as 'POST', url, headers: auth, payload: body });
    if (valid) expect([res.statusCode, res.body]).not.toEqual([400, expect.anything()]);
    else expect([res.statusCode, res.json().error]).toEqual([400, path === '/api/v1/webhook-subscriptions' ? 'invalid_url' : 'invalid_request']);
  });

  test('every string of a request is documented NUL-free, beside its own pattern where that one might admit NUL', () => {
    expect(paramSchema('/api/v1/kb/files', 'get', 'folder_id')).toMatchObject({ pattern: '^[^\\u0000]*$' });
    // An id's own pattern cannot match NUL: it stays alone.
    expect(paramSchema('/api/v1/agents/{id}', 'get', 'id')).toEqual(expect.objectContaining({ pattern: '^agt_[0-9a-f]{24}$' }));
    expect(paramSchema('/api/v1/agents/{id}', 'get', 'id')).not.toHaveProperty('allOf');
    // "Not blank" is a negated pattern beside the NUL one; an own pattern that might admit NUL gets the NUL one beside it.
    const search = (bodySchema('/api/v1/kb/search', 'post') as OpenAPIV3_1.SchemaObject).properties!.query as OpenAPIV3_1.SchemaObject;
    expect(search).toMatchObject({ pattern: '^[^\\u0000]*$', not: { pattern: expect.stringMatching(/^\^\[/) } });
    const origin = ((doc.components?.schemas?.AgentSpecInput as OpenAPIV3_1.SchemaObject).properties!.triggers as OpenAPIV3_1.SchemaObject).properties!.web_chat as OpenAPIV3_1.SchemaObject;
    expect(((origin.properties!.allowed_origins as OpenAPIV3_1.ArraySchemaObject).items as OpenAPIV3_1.SchemaObject).allOf).toContainEqual({ pattern: '^[^\\u0000]*$' });
    for (const [value, valid] of [['ok', true], [nul, false], [' ', false]] as const) expect([value, docAccepts(search, value)]).toEqual([value, valid]);
    // Responses are not touched.
    const folder = doc.components?.schemas?.Folder as OpenAPIV3_1.SchemaObject;
    expect(folder.properties?.name).toEqual({ type: 'string' });
  });

  test('query bounds: RFC 3339 date-times or dates; cursors of their documented form', async () => {
    for (const [path, name, value, valid] of [
      ['/api/v1/analytics/summary', 'from', '2026-01-01', true],
      ['/api/v1/analytics/summary', 'from', '2026-01-01T00:00:00+14:00', true],
      ['/api/v1/analytics/summary', 'from', '2026-01-01T00:00:00', false],
      ['/api/v1/billing/usage', 'to', 'yesterday', false],
      ['/api/v1/billing/usage', 'cursor', '2026-11-20.bXNnYXBwX21lc3NhZ2U', true],
      ['/api/v1/billing/usage', 'cursor', 'eyJkYXkiOiIyMDI2In0', false],
    ] as const) {
      expect([name, value, docAccepts(paramSchema(path, 'get', name), value)]).toEqual([name, value, valid]);
    }
  });

  test('the widget send rule: text may be blank only with file_refs', () => {
    const send = bodySchema('/api/public/widget/send', 'post');
    const conv = 'conv_000000000000000000000000';
    for (const [body, valid] of [
      [{ conversation_id: conv, text: 'hi' }, true],
      [{ conversation_id: conv, text: ' \n ' }, false],
      [{ conversation_id: conv }, false],
      [{ conversation_id: conv, file_refs: ['upl_000000000000000000000000'] }, true],
      [{ conversation_id: conv, text: '', file_refs: [] }, false],
    ] as const) {
      expect([body, docAccepts(send, body)]).toEqual([body, valid]);
    }
  });

  test('multipart forms document what their handlers check', () => {
    const form = (path: string) => ((doc.paths?.[path] as OpenAPIV3_1.PathItemObject).post!.requestBody as OpenAPIV3_1.RequestBodyObject).content['multipart/form-data'].schema as OpenAPIV3_1.SchemaObject;
    const props = (path: string) => (('$ref' in form(path) ? doc.components?.schemas?.[(form(path) as { $ref: string }).$ref.split('/').pop()!] : form(path)) as OpenAPIV3_1.SchemaObject).properties!;
    expect(props('/api/v1/kb/files').file).toMatchObject({ format: 'binary', minLength: 1 });
    expect(props('/api/v1/documents/extract_structured').schema).toMatchObject({ minLength: 1, contentMediaType: 'application/json', contentSchema: { type: 'object' } });
    expect(props('/api/v1/documents/extract_structured').prompt).toMatchObject({ maxLength: 4_000 });
  });

  test('a download documents the types stored bytes are served with, not JSON', () => {
    const ok = (doc.paths?.['/api/v1/kb/files/{id}/download'] as OpenAPIV3_1.PathItemObject).get!.responses!['200'] as OpenAPIV3_1.ResponseObject;
    expect(Object.keys(ok.content ?? {})).toEqual(expect.arrayContaining(['application/pdf', 'image/png', 'text/plain', 'application/octet-stream']));
    expect(ok.content?.['application/pdf']).toEqual({});
  });
});
