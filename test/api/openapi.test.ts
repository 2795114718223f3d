import { compileErrors, validate } from '@readme/openapi-parser';
import type { OpenAPIV3_1 } from 'openapi-types';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { startTestApp, type TestApp } from '../support/app';

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
