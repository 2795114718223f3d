import { compileErrors, validate } from '@readme/openapi-parser';
import type { OpenAPIV3_1 } from 'openapi-types';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';

let db: TestDatabase;
let t: TestApp;
let doc: OpenAPIV3_1.Document;

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url });
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
    const routes = t.app.routeTable.filter((r) => (r.url.startsWith('/api/v1/') || r.url.startsWith('/api/public/')) && r.url !== '/api/v1/openapi.json' && r.method !== 'HEAD');
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
      expect(op.security).toEqual([{ bearerApiKey: [] }]);
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
    expect(types).toEqual(['error', 'ping', 'reply', 'reply_delta', 'suggested_actions', 'task_status', 'ui:command']);
  });
});
