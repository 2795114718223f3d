import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import Fastify from 'fastify';
import { errorsPlugin } from '../../api/plugins/errors';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';

let db: TestDatabase;
let t: TestApp;
let auth: Record<string, string>;
let siteHeaders: Record<string, string>;
const ORIGIN = 'https://shop.example';

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url, bodyLimitBytes: 4096 });
  const ws = await createWorkspace(db.orm);
  auth = bearer((await createKey(t.services, ws, ['kb:read', 'kb:write', 'documents:extract', 'workflows:read', 'workflows:write', 'workflows:publish'])).key);
  const agent = await t.app.inject({ method: 'POST', url: '/api/v1/agents', headers: auth, payload: { name: 'Helper', instructions: 'Help.', triggers: { web_chat: { allowed_origins: [ORIGIN], file_upload: true } } } });
  await t.app.inject({ method: 'POST', url: `/api/v1/agents/${agent.json().id}/publish`, headers: auth });
  siteHeaders = { 'x-concierge-site': (await t.services.sites.create(ws, agent.json().id, [ORIGIN])).site_id, origin: ORIGIN };
});
afterAll(async () => {
  await t.close();
  await db.drop();
});

const countFolders = async () => Number((await db.orm.em.fork().execute<{ n: string }[]>('select count(*) as n from kb_folders'))[0].n);

describe('every error is the {error, message} envelope', () => {
  test('unknown routes are 404 not_found, with or without a key', async () => {
    for (const headers of [{}, auth]) {
      const res = await t.app.inject({ method: 'GET', url: '/api/v1/nope', headers });
      expect(res.statusCode).toBe(404);
      expect(res.json()).toEqual({ error: 'not_found', message: 'No route GET /api/v1/nope' });
    }
  });

  test('malformed JSON is 400 invalid_request and writes nothing', async () => {
    const before = await countFolders();
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/v1/kb/folders',
      headers: { ...auth, 'content-type': 'application/json' },
      payload: '{"name": "x",',
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: 'invalid_request', message: 'body: malformed JSON' });
    const empty = await t.app.inject({ method: 'POST', url: '/api/v1/kb/folders', headers: { ...auth, 'content-type': 'application/json' }, payload: '' });
    expect(empty.statusCode).toBe(400);
    expect(empty.json().error).toBe('invalid_request');
    const notObject = await t.app.inject({ method: 'POST', url: '/api/v1/kb/folders', headers: { ...auth, 'content-type': 'application/json' }, payload: '[1,2]' });
    expect(notObject.statusCode).toBe(400);
    expect(notObject.json().error).toBe('invalid_request');
    expect(await countFolders()).toBe(before);
  });

  test('a Content-Type other than JSON is 415 unsupported_media_type', async () => {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml']) {
      const res = await t.app.inject({ method: 'POST', url: '/api/v1/kb/folders', headers: { ...auth, 'content-type': type }, payload: 'name=x' });
      expect(res.statusCode).toBe(415);
      expect(res.json()).toEqual({ error: 'unsupported_media_type', message: expect.stringContaining('application/json') });
    }
  });

  test('an oversized body is 413 payload_too_large', async () => {
    const res = await t.app.inject({ method: 'POST', url: '/api/v1/kb/folders', headers: auth, payload: { name: 'x', pad: 'y'.repeat(10_000) } });
    expect(res.statusCode).toBe(413);
    expect(res.json()).toEqual({ error: 'payload_too_large', message: expect.any(String) });
  });

  test('validation failures name the field, in body and query', async () => {
    const body = await t.app.inject({ method: 'POST', url: '/api/v1/kb/folders', headers: auth, payload: { name: 7 } });
    expect(body.statusCode).toBe(400);
    expect(body.json()).toEqual({ error: 'invalid_request', message: expect.stringMatching(/^body\.name: /) });
    const query = await t.app.inject({ method: 'GET', url: '/api/v1/kb/folders?parent_id=', headers: auth });
    expect(query.statusCode).toBe(400);
    expect(query.json().message).toMatch(/^querystring\.parent_id: /);
  });

  test('every response carries a request id; a 5xx body is generic and quotes it', async () => {
    const broken = await startTestApp({ orm: db.orm, databaseUrl: db.url });
    const ws = await createWorkspace(db.orm);
    const key = bearer((await createKey(broken.services, ws, ['kb:read'])).key);
    // Warm the key cache, then take the table the handler reads away.
    expect((await broken.app.inject({ method: 'GET', url: '/api/v1/kb/folders', headers: key })).statusCode).toBe(200);
    await db.orm.em.fork().execute('alter table kb_folders rename to kb_folders_away');
    try {
      const res = await broken.app.inject({ method: 'GET', url: '/api/v1/kb/folders', headers: key });
      expect(res.statusCode).toBe(500);
      const id = res.headers['x-request-id'];
      expect(id).toMatch(/^req_[0-9a-f]{24}$/);
      expect(res.json()).toEqual({ error: 'internal_error', message: `An internal error occurred; quote request id ${id} to support` });
      expect(res.body).not.toMatch(/kb_folders|relation|select/i);
    } finally {
      await db.orm.em.fork().execute('alter table kb_folders_away rename to kb_folders');
      await broken.close();
    }
  });
});

describe('voice dial-out through the API', () => {
  test('is refused before authentication and answers in the envelope after it (an unknown agent: 404)', async () => {
    const unauth = await t.app.inject({ method: 'POST', url: '/api/v1/outbound', payload: { channel: 'voice' } });
    expect(unauth.statusCode).toBe(401);
    const ws = await createWorkspace(db.orm);
    const writer = bearer((await createKey(t.services, ws, ['conversations:write'])).key);
    const res = await t.app.inject({ method: 'POST', url: '/api/v1/outbound', headers: writer, payload: { channel: 'voice', to: '+14155550123', agent_id: 'agt_000000000000000000000000' } });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ error: 'not_found', message: expect.stringContaining('agent') });
  });
});

describe('no 5xx on bad input: strings PostgreSQL cannot store, repeated and huge parameters, deep JSON', () => {
  const NUL = '\u0000';
  const LONE = '\ud800';

  test.each([
    ['NUL', NUL, /must not contain the NUL character/],
    ['lone surrogate', LONE, /lone UTF-16 surrogate/],
  ])('a %s in a JSON string field is 400 invalid_request naming the field, on every route', async (_what, bad, reason) => {
    const cases: Array<[string, string, Record<string, string>, unknown, string]> = [
      ['POST', '/api/v1/agents', auth, { name: `x${bad}` }, 'body.name'],
      ['POST', '/api/v1/agents/from-spec', auth, { spec: { name: 'ok', instructions: `a${bad}b` } }, 'body.spec.instructions'],
      ['POST', '/api/v1/agents', auth, { name: 'ok', triggers: { web_chat: { allowed_origins: [`https://a${bad}.example`] } } }, 'body.triggers.web_chat.allowed_origins.0'],
      ['PATCH', '/api/v1/agents/agt_000000000000000000000000', auth, { instructions: { [`k${bad}`]: 1 } }, 'body.instructions'],
      ['POST', '/api/v1/kb/folders', auth, { name: `x${bad}` }, 'body.name'],
      ['POST', '/api/public/widget/conversations/new', siteHeaders, { user_context: { external_id: `u${bad}` } }, 'body.user_context.external_id'],
      ['POST', '/api/public/widget/init', siteHeaders, { conversation_id: `conv_${bad}` }, 'body.conversation_id'],
    ];
    for (const [method, url, headers, payload, field] of cases) {
      // JSON.stringify escapes a lone surrogate as \\ud800: exactly what a client would send.
      const res = await t.app.inject({ method: method as 'POST', url, headers: { ...headers, 'content-type': 'application/json' }, payload: JSON.stringify(payload) });
      expect({ url, status: res.statusCode, body: res.json() }).toEqual({
        url,
        status: 400,
        body: { error: 'invalid_request', message: expect.stringMatching(new RegExp(`^${field.replace(/\./g, '\\.')}: .*${reason.source}`)) },
      });
    }
  });

  test('a NUL in a query or path parameter is 400 naming it', async () => {
    const query = await t.app.inject({ method: 'GET', url: '/api/v1/kb/folders?parent_id=fld%00x', headers: auth });
    expect(query.statusCode).toBe(400);
    expect(query.json()).toEqual({ error: 'invalid_request', message: expect.stringMatching(/^querystring\.parent_id: must not contain the NUL/) });
    const param = await t.app.inject({ method: 'GET', url: '/api/v1/agents/agt_%00', headers: auth });
    expect(param.statusCode).toBe(400);
    expect(param.json().message).toMatch(/^params\.id: must not contain the NUL/);
    // An unknown parameter is ignored (cache-busters), but not when it holds what cannot be stored.
    const buster = await t.app.inject({ method: 'GET', url: '/api/v1/kb/folders?_=1700000000&_=1700000001', headers: auth });
    expect(buster.statusCode).toBe(200);
    const badBuster = await t.app.inject({ method: 'GET', url: '/api/v1/kb/folders?_=%00', headers: auth });
    expect(badBuster.statusCode).toBe(400);
    expect(badBuster.json().message).toMatch(/^querystring\._: /);
  });

  test('a NUL in a header that reaches the database is 400 naming the header', async () => {
    const site = await t.app.inject({ method: 'POST', url: '/api/public/widget/init', headers: { ...siteHeaders, 'x-concierge-site': `site_${NUL}` }, payload: {} });
    expect(site.statusCode).toBe(400);
    expect(site.json()).toEqual({ error: 'invalid_request', message: expect.stringMatching(/^headers\.x-concierge-site: must not contain the NUL/) });
  });

  test('a NUL in a multipart text field or file name is 400 naming it, and stores nothing', async () => {
    const form = (field: string, filename: string) =>
      [
        '--b',
        'Content-Disposition: form-data; name="name"',
        '',
        field,
        '--b',
        `Content-Disposition: form-data; name="file"; filename="${filename}"`,
        'Content-Type: text/plain',
        '',
        'hello',
        '--b--',
        '',
      ].join('\r\n');
    const headers = { ...auth, 'content-type': 'multipart/form-data; boundary=b' };
    const field = await t.app.inject({ method: 'POST', url: '/api/v1/kb/files', headers, payload: form(`a${NUL}b`, 'a.txt') });
    expect(field.statusCode).toBe(400);
    expect(field.json()).toEqual({ error: 'invalid_request', message: expect.stringMatching(/^body\.name: must not contain the NUL/) });
    const name = await t.app.inject({ method: 'POST', url: '/api/v1/kb/files', headers, payload: form('ok', `a${NUL}.txt`) });
    expect(name.statusCode).toBe(400);
    expect(name.json().message).toMatch(/^file\.filename: must not contain the NUL/);
    const noBoundary = await t.app.inject({ method: 'POST', url: '/api/v1/kb/files', headers: { ...auth, 'content-type': 'multipart/form-data' }, payload: 'x' });
    expect(noBoundary.statusCode).toBe(400);
    expect(noBoundary.json().error).toBe('invalid_request');
    const files = await t.app.inject({ method: 'GET', url: '/api/v1/kb/files', headers: auth });
    expect(files.json().files).toEqual([]);
  });

  test('a repeated single-valued query parameter and a huge integer are 400 naming the parameter', async () => {
    for (const url of ['/api/v1/kb/folders?parent_id=a&parent_id=b', '/api/v1/agents?limit=1&limit=2', '/api/v1/agents?limit=99999999999999999999999', '/api/v1/agents?limit=1e400']) {
      const res = await t.app.inject({ method: 'GET', url, headers: auth });
      expect({ url, status: res.statusCode, error: res.json().error, message: res.json().message }).toEqual({ url, status: 400, error: 'invalid_request', message: expect.stringMatching(/^querystring\.(parent_id|limit): /) });
    }
    const body = await t.app.inject({ method: 'POST', url: '/api/v1/kb/search', headers: { ...auth, 'content-type': 'application/json' }, payload: '{"query":"x","top_k":1e400}' });
    expect(body.statusCode).toBe(400);
    expect(body.json().message).toMatch(/^body\.top_k: /);
  });

  test('any RFC 3339 timestamp bound is accepted, even where PostgreSQL has no such date (year 0, offsets past 15:59)', async () => {
    const reader = bearer((await createKey(t.services, await createWorkspace(db.orm), ['conversations:read'])).key);
    for (const q of ['since=0000-01-01T00:00:00Z', 'until=0295-08-24T20:09:41.7-16:28', 'since=9999-12-31T23:59:59-23:59']) {
      const res = await t.app.inject({ method: 'GET', url: `/api/v1/messages?${q.replace(/\+/g, '%2B')}`, headers: reader });
      expect({ q, status: res.statusCode }).toEqual({ q, status: 200 });
    }
  });

  test('deeply nested JSON is 400 invalid_request before anything parses or stores it', async () => {
    const before = await countFolders();
    for (const payload of [`{"name":"x","pad":${'['.repeat(5000)}${']'.repeat(5000)}}`, `{"name":"x","pad":${'{"a":'.repeat(100)}1${'}'.repeat(100)}}`]) {
      const big = await startTestApp({ orm: db.orm, databaseUrl: db.url, bodyLimitBytes: 1024 * 1024 });
      try {
        const res = await big.app.inject({ method: 'POST', url: '/api/v1/agents', headers: { ...auth, 'content-type': 'application/json' }, payload });
        expect(res.statusCode).toBe(400);
        expect(res.json()).toEqual({ error: 'invalid_request', message: 'body: nested deeper than 32 levels' });
      } finally {
        await big.close();
      }
    }
    // Brackets inside strings are text, not nesting.
    const text = await t.app.inject({ method: 'POST', url: '/api/v1/kb/folders', headers: { ...auth, 'content-type': 'application/json' }, payload: JSON.stringify({ name: `[${'{'.repeat(40)}` }) });
    expect(text.statusCode).toBe(201);
    expect(await countFolders()).toBe(before + 1);
  });
});

describe('methods (RFC 9110)', () => {
  test('a known path with a method it does not serve is 405 method_not_allowed with Allow, not 404', async () => {
    const put = await t.app.inject({ method: 'PUT', url: '/api/v1/kb/folders', headers: auth });
    expect(put.statusCode).toBe(405);
    expect(put.headers.allow).toBe('GET, HEAD, POST, OPTIONS');
    expect(put.json()).toEqual({ error: 'method_not_allowed', message: 'PUT is not allowed on /api/v1/kb/folders; allowed: GET, HEAD, POST, OPTIONS' });
    // Path parameters match as for the real routes, with or without a key.
    const get = await t.app.inject({ method: 'GET', url: '/api/v1/kb/folders/fld_x' });
    expect(get.statusCode).toBe(405);
    expect(get.headers.allow).toBe('PATCH, DELETE, OPTIONS');
    const widget = await t.app.inject({ method: 'GET', url: '/api/public/widget/send', headers: siteHeaders });
    expect(widget.statusCode).toBe(405);
    expect(widget.headers.allow).toBe('POST, OPTIONS');
    // Decided before the body is read: an unknown Content-Type does not turn it into a 415.
    const withBody = await t.app.inject({ method: 'DELETE', url: '/api/v1/kb/folders', headers: { ...auth, 'content-type': 'application/xml' }, payload: '<x/>' });
    expect(withBody.statusCode).toBe(405);
    // An unknown path stays 404.
    expect((await t.app.inject({ method: 'PUT', url: '/api/v1/nope', headers: auth })).statusCode).toBe(404);
  });

  test('every method Fastify routes is covered: TRACE and QUERY are 405 with Allow, QUERY before its Content-Type rule', async () => {
    for (const method of ['TRACE', 'QUERY'] as const) {
      // QUERY without Content-Type would be a 400 (RFC 10008) if it reached body handling.
      for (const url of ['/api/v1/kb/folders', '/api/v1/kb/folders/fld_x', '/api/v1/messages/msg_x']) {
        const res = await t.app.inject({ method, url, headers: auth });
        expect([method, url, res.statusCode, res.json().error]).toEqual([method, url, 405, 'method_not_allowed']);
        expect(res.headers.allow).toMatch(/, OPTIONS$/);
      }
    }
    const query = await t.app.inject({ method: 'QUERY', url: '/api/v1/kb/folders', headers: { ...auth, 'content-type': 'application/json' }, payload: '{' });
    expect([query.statusCode, query.headers.allow]).toEqual([405, 'GET, HEAD, POST, OPTIONS']);
  });

  test('OPTIONS on a widget path still answers the CORS preflight', async () => {
    const res = await t.app.inject({
      method: 'OPTIONS',
      url: '/api/public/widget/send',
      headers: { origin: 'https://elsewhere.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type,x-concierge-site' },
    });
    expect(res.statusCode).toBe(204);
    expect(res.headers['access-control-allow-origin']).toBe('https://elsewhere.example');
  });
});

describe('client errors raised before any route use the envelope, with their own codes', () => {
  let base: { host: string; port: number };
  beforeAll(async () => {
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = { host: '127.0.0.1', port: (t.app.server.address() as AddressInfo).port };
  });

  /** Writes raw bytes and reads the whole answer: Node's parser refuses these before Fastify sees them. */
  function raw(request: string): Promise<{ status: number; headers: string; body: string }> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(base.port, base.host, () => socket.write(request));
      let data = '';
      socket.on('data', (chunk) => (data += chunk.toString('latin1')));
      socket.on('error', reject);
      socket.on('close', () => {
        const [head, ...rest] = data.split('\r\n\r\n');
        resolve({ status: Number(head.split(' ')[1]), headers: head, body: rest.join('\r\n\r\n') });
      });
    });
  }

  test('headers over the limit are 431 request_header_fields_too_large', async () => {
    const res = await new Promise<{ status: number; type: string; body: string }>((resolve, reject) => {
      const req = http.request({ ...base, path: '/api/v1/kb/folders', headers: { ...auth, 'x-big': 'a'.repeat(40_000) } }, (r) => {
        let body = '';
        r.on('data', (c) => (body += c));
        r.on('end', () => resolve({ status: r.statusCode!, type: String(r.headers['content-type']), body }));
      });
      req.on('error', reject);
      req.end();
    });
    expect(res.status).toBe(431);
    expect(res.type).toMatch(/^application\/json/);
    expect(JSON.parse(res.body)).toEqual({ error: 'request_header_fields_too_large', message: 'headers: larger than this server accepts' });
  });

  test('a request Node cannot parse is 400 invalid_request in the envelope', async () => {
    const res = await raw('GET /api/v1/kb/folders HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n');
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body)).toEqual({ error: 'invalid_request', message: expect.stringMatching(/^request: malformed HTTP/) });
  });

  test('a path the router refuses (bad percent-encoding, over-long parameter) gets the envelope', async () => {
    const bad = await t.app.inject({ method: 'GET', url: '/api/v1/kb/folders/%E0%A4%A', headers: auth });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toEqual({ error: 'invalid_request', message: 'path: malformed percent-encoding' });
    const long = await t.app.inject({ method: 'GET', url: `/api/v1/agents/${'a'.repeat(3000)}`, headers: auth });
    expect(long.statusCode).toBe(414);
    expect(long.json()).toEqual({ error: 'uri_too_long', message: expect.any(String) });
  });

  test('a 4xx without its own mapping answers the code of its status, not invalid_request', async () => {
    const mini = Fastify();
    await mini.register(errorsPlugin);
    for (const status of [406, 409, 410, 416, 422]) {
      mini.get(`/s${status}`, async () => {
        throw Object.assign(new Error(`refused with ${status}`), { statusCode: status });
      });
    }
    const expected: Record<number, string> = { 406: 'not_acceptable', 409: 'conflict', 410: 'gone', 416: 'range_not_satisfiable', 422: 'unprocessable_entity' };
    for (const [status, code] of Object.entries(expected)) {
      const res = await mini.inject({ method: 'GET', url: `/s${status}` });
      expect(res.statusCode).toBe(Number(status));
      expect(res.json()).toEqual({ error: code, message: `refused with ${status}` });
    }
    await mini.close();
  });
});
