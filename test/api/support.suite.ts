import { runAdminCli } from '../support/cli';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { newId } from '../../lib/ids';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';
import { createTestDatabase, type TestDatabase } from '../support/db';

/**
 * Support tickets: a workspace raises and replies through the API, the platform operator
 * lists, answers and closes them with the admin CLI (a real child process on the same
 * database); the status follows whose turn it is; one workspace never sees another's.
 */

let db: TestDatabase;
let t: TestApp;
let wsA: string;
let wsB: string;
let authA: Record<string, string>;
let authB: Record<string, string>;
const cliDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-support-cli-'));

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url });
  wsA = await createWorkspace(db.orm, 'Acme');
  wsB = await createWorkspace(db.orm, 'Globex');
  authA = bearer((await createKey(t.services, wsA, ['support:read', 'support:write'])).key);
  authB = bearer((await createKey(t.services, wsB, ['support:read', 'support:write'])).key);
});
afterAll(async () => {
  await t.close();
  await db.drop();
  fs.rmSync(cliDataDir, { recursive: true, force: true });
});

const admin = (args: string[], input = '') => runAdminCli(args, { env: { DATABASE_URL: db.url, CONCIERGE_DATA_DIR: cliDataDir }, input });

const post = (auth: Record<string, string>, url: string, payload: unknown) => t.app.inject({ method: 'POST', url, headers: auth, payload: payload as object });
const get = (auth: Record<string, string>, url: string) => t.app.inject({ method: 'GET', url, headers: auth });
const raise = async (auth: Record<string, string>, payload: Record<string, unknown> = {}) => {
  const res = await post(auth, '/api/v1/support/tickets', { subject: 'Replies stopped', body: 'Our agent stopped answering at 10:00 UTC.', priority: 'high', ...payload });
  expect(res.statusCode).toBe(201);
  return res.json();
};

describe('the workspace side (API)', () => {
  test('create: 201, status open, the body is the first message of the thread', async () => {
    const ticket = await raise(authA);
    expect(ticket).toEqual({
      id: expect.stringMatching(/^tkt_[0-9a-f]{24}$/),
      subject: 'Replies stopped',
      priority: 'high',
      status: 'open',
      created_at: expect.any(String),
      updated_at: expect.any(String),
      closed_at: null,
      messages: [{ id: expect.stringMatching(/^tkm_/), author: 'customer', body: 'Our agent stopped answering at 10:00 UTC.', created_at: expect.any(String) }],
    });
    expect((await get(authA, `/api/v1/support/tickets/${ticket.id}`)).json()).toEqual(ticket);
    const normal = await raise(authA, { priority: undefined });
    expect(normal.priority).toBe('normal');
  });

  test('bad input is 400 invalid_request naming the field', async () => {
    const refused: Array<[unknown, RegExp]> = [
      [{ body: 'x' }, /subject/],
      [{ subject: '   ', body: 'x' }, /subject/],
      [{ subject: 'x'.repeat(201), body: 'x' }, /subject/],
      [{ subject: 'x' }, /body/],
      [{ subject: 'x', body: '  \n ' }, /body: must not be empty/],
      [{ subject: 'x', body: 'y', priority: 'asap' }, /priority/],
      [{ subject: 'x', body: 'y', status: 'closed' }, /status/],
    ];
    for (const [payload, message] of refused) {
      const res = await post(authA, '/api/v1/support/tickets', payload);
      expect({ payload, status: res.statusCode, error: res.json().error }).toEqual({ payload, status: 400, error: 'invalid_request' });
      expect(res.json().message).toMatch(message);
    }
    const ticket = await raise(authA);
    const empty = await post(authA, `/api/v1/support/tickets/${ticket.id}/reply`, { body: '' });
    expect(empty.statusCode).toBe(400);
    expect(empty.json().message).toMatch(/body/);
    expect((await get(authA, '/api/v1/support/tickets?status=pending')).statusCode).toBe(400);
    expect((await get(authA, '/api/v1/support/tickets?cursor=nope')).statusCode).toBe(400);
  });

  test('scopes: reading needs support:read, raising and replying support:write', async () => {
    const readOnly = bearer((await createKey(t.services, wsA, ['support:read'])).key);
    const none = bearer((await createKey(t.services, wsA, ['kb:read'])).key);
    const ticket = await raise(authA);
    for (const res of [
      await post(readOnly, '/api/v1/support/tickets', { subject: 's', body: 'b' }),
      await post(readOnly, `/api/v1/support/tickets/${ticket.id}/reply`, { body: 'b' }),
    ]) {
      expect(res.statusCode).toBe(403);
      expect(res.json()).toMatchObject({ error: 'insufficient_scope', message: expect.stringContaining('support:write') });
    }
    expect((await get(readOnly, `/api/v1/support/tickets/${ticket.id}`)).statusCode).toBe(200);
    for (const url of ['/api/v1/support/tickets', `/api/v1/support/tickets/${ticket.id}`]) {
      const res = await get(none, url);
      expect({ url, status: res.statusCode, error: res.json().error }).toEqual({ url, status: 403, error: 'insufficient_scope' });
    }
  });

  test('the list pages newest first with a cursor and filters by status', async () => {
    const ws = await createWorkspace(db.orm);
    const auth = bearer((await createKey(t.services, ws, ['support:read', 'support:write'])).key);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await raise(auth, { subject: `t${i}` })).id);
    await t.services.support.operatorReply(ids[1], 'Looking into it.');
    await t.services.support.close(ids[3]);
    const first = (await get(auth, '/api/v1/support/tickets?limit=2')).json();
    expect(first.tickets.map((x: { id: string }) => x.id)).toEqual([ids[4], ids[3]]);
    expect(first.tickets[0]).not.toHaveProperty('messages');
    const second = (await get(auth, `/api/v1/support/tickets?limit=2&cursor=${first.next_cursor}`)).json();
    const third = (await get(auth, `/api/v1/support/tickets?limit=2&cursor=${second.next_cursor}`)).json();
    expect([...second.tickets, ...third.tickets].map((x: { id: string }) => x.id)).toEqual([ids[2], ids[1], ids[0]]);
    expect(third.next_cursor).toBeNull();
    const byStatus = async (s: string) => (await get(auth, `/api/v1/support/tickets?status=${s}`)).json().tickets.map((x: { id: string }) => x.id);
    expect(await byStatus('open')).toEqual([ids[4], ids[2], ids[0]]);
    expect(await byStatus('waiting_on_customer')).toEqual([ids[1]]);
    expect(await byStatus('closed')).toEqual([ids[3]]);
  });
});

describe('the operator side (admin CLI) and the thread', () => {
  test('list, reply (waits on the customer), the customer replies (open again), close (replies refused with 409 ticket_closed)', async () => {
    const ticket = await raise(authA, { subject: 'CLI ticket', priority: 'urgent' });

    const listed = await admin(['support', 'list', '--status', 'open', '--workspace', wsA]);
    expect(listed.code).toBe(0);
    const rows = JSON.parse(listed.stdout).tickets;
    expect(rows.find((r: { id: string }) => r.id === ticket.id)).toMatchObject({ id: ticket.id, workspace_id: wsA, subject: 'CLI ticket', priority: 'urgent', status: 'open' });

    const bodyFile = path.join(cliDataDir, 'reply.txt');
    fs.writeFileSync(bodyFile, 'Hello from support.\nWe restarted the number; please try again.\n');
    const replied = await admin(['support', 'reply', ticket.id, '--body-file', bodyFile]);
    expect(replied.code).toBe(0);
    expect(JSON.parse(replied.stdout)).toMatchObject({ status: 'waiting_on_customer' });

    const seen = (await get(authA, `/api/v1/support/tickets/${ticket.id}`)).json();
    expect(seen.status).toBe('waiting_on_customer');
    expect(seen.messages.map((m: { author: string; body: string }) => [m.author, m.body])).toEqual([
      ['customer', 'Our agent stopped answering at 10:00 UTC.'],
      ['operator', 'Hello from support.\nWe restarted the number; please try again.'],
    ]);

    const answer = await post(authA, `/api/v1/support/tickets/${ticket.id}/reply`, { body: 'Still broken for +15550100001.' });
    expect(answer.statusCode).toBe(201);
    expect(answer.json()).toMatchObject({ status: 'open', messages: [{ author: 'customer' }, { author: 'operator' }, { author: 'customer', body: 'Still broken for +15550100001.' }] });

    const fromStdin = await admin(['support', 'reply', ticket.id, '--body-file', '-'], 'Fixed now: a token had expired.\n');
    expect(fromStdin.code).toBe(0);
    const inline = await admin(['support', 'reply', ticket.id, '--body', 'Closing this one.']);
    expect(JSON.parse(inline.stdout).messages.map((m: { body: string }) => m.body).slice(-2)).toEqual(['Fixed now: a token had expired.', 'Closing this one.']);

    const closed = await admin(['support', 'close', ticket.id]);
    expect(closed.code).toBe(0);
    expect(JSON.parse(closed.stdout)).toMatchObject({ id: ticket.id, status: 'closed', closed_at: expect.any(String) });

    const late = await post(authA, `/api/v1/support/tickets/${ticket.id}/reply`, { body: 'One more thing' });
    expect(late.statusCode).toBe(409);
    expect(late.json()).toEqual({ error: 'ticket_closed', message: expect.stringContaining('closed') });
    const operatorLate = await admin(['support', 'reply', ticket.id, '--body', 'x']);
    expect(operatorLate.code).toBe(1);
    expect(operatorLate.stderr).toMatch(/^error: ticket_closed: /);
    expect((await get(authA, `/api/v1/support/tickets/${ticket.id}`)).json().messages).toHaveLength(5);

    const bad = await admin(['support', 'list', '--status', 'pending']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--status must be one of open, waiting_on_customer, closed/);
    const both = await admin(['support', 'reply', ticket.id]);
    expect(both.code).toBe(2);
    const unknown = await admin(['support', 'close', newId('tkt')]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/^error: not_found: /);
  }, 120_000);

  test('a reply racing a close never lands on the closed ticket', async () => {
    for (let i = 0; i < 5; i++) {
      const ticket = await raise(authA);
      const [reply, close] = await Promise.allSettled([t.services.support.reply(wsA, ticket.id, 'racing'), t.services.support.close(ticket.id)]);
      expect(close.status).toBe('fulfilled');
      const final = (await get(authA, `/api/v1/support/tickets/${ticket.id}`)).json();
      expect(final.status).toBe('closed');
      // The reply either went in before the close, or was refused as ticket_closed.
      if (reply.status === 'fulfilled') expect(final.messages).toHaveLength(2);
      else {
        expect((reply.reason as { code?: string }).code).toBe('ticket_closed');
        expect(final.messages).toHaveLength(1);
      }
    }
  });
});

describe('two workspaces', () => {
  test("workspace B never sees nor replies to A's ticket", async () => {
    const ticket = await raise(authA, { subject: 'A private' });
    expect((await get(authB, `/api/v1/support/tickets/${ticket.id}`)).json()).toMatchObject({ error: 'not_found' });
    expect((await get(authB, `/api/v1/support/tickets/${ticket.id}`)).statusCode).toBe(404);
    const reply = await post(authB, `/api/v1/support/tickets/${ticket.id}/reply`, { body: 'hi' });
    expect(reply.statusCode).toBe(404);
    expect((await get(authB, '/api/v1/support/tickets?limit=200')).json().tickets.map((x: { id: string }) => x.id)).not.toContain(ticket.id);
    expect((await get(authA, `/api/v1/support/tickets/${ticket.id}`)).json().messages).toHaveLength(1);
  });
});
