import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';

let db: TestDatabase;
let t: TestApp;
let auth: Record<string, string>;
let otherAuth: Record<string, string>;

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url });
  const ws = await createWorkspace(db.orm);
  auth = bearer((await createKey(t.services, ws, ['kb:read', 'kb:write'])).key);
  const other = await createWorkspace(db.orm, 'Other');
  otherAuth = bearer((await createKey(t.services, other, ['kb:read', 'kb:write'])).key);
});
afterAll(async () => {
  await t.close();
  await db.drop();
});

const create = (name: unknown, parent_id?: unknown, headers = auth) =>
  t.app.inject({ method: 'POST', url: '/api/v1/kb/folders', headers, payload: parent_id === undefined ? { name } : { name, parent_id } });
const list = (parent_id?: string, headers = auth) =>
  t.app.inject({ method: 'GET', url: '/api/v1/kb/folders', headers, query: parent_id ? { parent_id } : {} });

describe('knowledge-base folders', () => {
  test('create returns 201 with the folder, path from the top', async () => {
    const top = await create('Policies');
    expect(top.statusCode).toBe(201);
    const folder = top.json();
    expect(folder).toEqual({
      id: expect.stringMatching(/^fld_[0-9a-f]{24}$/),
      name: 'Policies',
      parent_id: null,
      path: '/Policies',
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    expect(new Date(folder.created_at).toISOString()).toBe(folder.created_at);
    const child = await create('Returns', folder.id);
    expect(child.statusCode).toBe(201);
    expect(child.json()).toMatchObject({ name: 'Returns', parent_id: folder.id, path: '/Policies/Returns' });
  });

  test('unknown parent is 404 parent_not_found, and a parent in another workspace is unknown too', async () => {
    const res = await create('X', 'fld_000000000000000000000000');
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ error: 'parent_not_found', message: expect.stringContaining('fld_000000000000000000000000') });
    const foreign = (await create('Foreign', undefined, otherAuth)).json();
    const cross = await create('X', foreign.id);
    expect(cross.statusCode).toBe(404);
    expect(cross.json().error).toBe('parent_not_found');
  });

  test('names must be 1 to 200 characters; the error names the field', async () => {
    for (const bad of ['', 'x'.repeat(201), '   ', 'tab\tname', 42, null]) {
      const res = await create(bad);
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toBe('invalid_request');
      expect(res.json().message).toMatch(/body\.name/);
    }
    expect((await create('y'.repeat(200))).statusCode).toBe(201);
    const missing = await t.app.inject({ method: 'POST', url: '/api/v1/kb/folders', headers: auth, payload: {} });
    expect(missing.statusCode).toBe(400);
    expect(missing.json().message).toMatch(/body\.name/);
    const extra = await t.app.inject({ method: 'POST', url: '/api/v1/kb/folders', headers: auth, payload: { name: 'ok', colour: 'red' } });
    expect(extra.statusCode).toBe(400);
    expect(extra.json().message).toMatch(/colour/);
  });

  test('sibling names are unique (409 folder_exists); the same name under another parent is fine', async () => {
    const a = (await create('Dupes')).json();
    const again = await create('Dupes');
    expect(again.statusCode).toBe(409);
    expect(again.json().error).toBe('folder_exists');
    expect((await create('Dupes', a.id)).statusCode).toBe(201);
    // Concurrent creates of one name: exactly one wins.
    const results = await Promise.all(Array.from({ length: 6 }, () => create('Race')));
    expect(results.filter((r) => r.statusCode === 201)).toHaveLength(1);
    expect(results.filter((r) => r.statusCode === 409)).toHaveLength(5);
  });

  test('list is one level, sorted by name, in {folders}; parent_id lists subfolders', async () => {
    const root = (await create('Sorted')).json();
    for (const n of ['b', 'C', 'a', 'B']) expect((await create(n, root.id)).statusCode).toBe(201);
    const grand = (await list(root.id)).json().folders.find((f: { name: string }) => f.name === 'a');
    await create('deep', grand.id);
    const res = await list(root.id);
    expect(res.statusCode).toBe(200);
    expect(res.json().folders.map((f: { name: string }) => f.name)).toEqual(['B', 'C', 'a', 'b']);
    const top = (await list()).json().folders;
    expect(top.every((f: { parent_id: string | null }) => f.parent_id === null)).toBe(true);
    expect(top.map((f: { name: string }) => f.name)).toEqual([...top.map((f: { name: string }) => f.name)].sort());
    expect((await list('fld_000000000000000000000000')).statusCode).toBe(404);
  });

  test('workspaces never see each other’s folders', async () => {
    const mine = (await create('Private')).json();
    const theirs = (await list(undefined, otherAuth)).json().folders;
    expect(theirs.find((f: { id: string }) => f.id === mine.id)).toBeUndefined();
    const rename = await t.app.inject({ method: 'PATCH', url: `/api/v1/kb/folders/${mine.id}`, headers: otherAuth, payload: { name: 'Stolen' } });
    expect(rename.statusCode).toBe(404);
    const del = await t.app.inject({ method: 'DELETE', url: `/api/v1/kb/folders/${mine.id}`, headers: otherAuth });
    expect(del.statusCode).toBe(404);
  });

  test('rename changes only the name; descendant paths follow', async () => {
    const top = (await create('Old')).json();
    const mid = (await create('Mid', top.id)).json();
    const leaf = (await create('Leaf', mid.id)).json();
    const res = await t.app.inject({ method: 'PATCH', url: `/api/v1/kb/folders/${top.id}`, headers: auth, payload: { name: 'New/Name' } });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ id: top.id, name: 'New/Name', parent_id: null, path: '/New/Name', created_at: top.created_at });
    const mids = (await list(top.id)).json().folders;
    expect(mids).toEqual([expect.objectContaining({ id: mid.id, path: '/New/Name/Mid' })]);
    expect((await list(mid.id)).json().folders).toEqual([expect.objectContaining({ id: leaf.id, path: '/New/Name/Mid/Leaf' })]);
    // Renaming again works from a path holding '/' in a name.
    await t.app.inject({ method: 'PATCH', url: `/api/v1/kb/folders/${top.id}`, headers: auth, payload: { name: 'Plain' } });
    expect((await list(mid.id)).json().folders[0].path).toBe('/Plain/Mid/Leaf');
  });

  test('rename errors: unknown id 404, sibling clash 409, bad name 400', async () => {
    const a = (await create('RenA')).json();
    await create('RenB');
    const clash = await t.app.inject({ method: 'PATCH', url: `/api/v1/kb/folders/${a.id}`, headers: auth, payload: { name: 'RenB' } });
    expect(clash.statusCode).toBe(409);
    expect(clash.json().error).toBe('folder_exists');
    const unknown = await t.app.inject({ method: 'PATCH', url: '/api/v1/kb/folders/fld_nope', headers: auth, payload: { name: 'X' } });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().error).toBe('not_found');
    const bad = await t.app.inject({ method: 'PATCH', url: `/api/v1/kb/folders/${a.id}`, headers: auth, payload: { name: '' } });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().message).toMatch(/body\.name/);
    // Nothing changed by the failures.
    expect((await list()).json().folders.find((f: { id: string }) => f.id === a.id).name).toBe('RenA');
  });

  test('delete: non-empty is 409 folder_not_empty with counts; empty succeeds with affected_agents', async () => {
    const top = (await create('ToDelete')).json();
    const child = (await create('Child', top.id)).json();
    await create('Child2', top.id);
    const refused = await t.app.inject({ method: 'DELETE', url: `/api/v1/kb/folders/${top.id}`, headers: auth });
    expect(refused.statusCode).toBe(409);
    expect(refused.json()).toEqual({ error: 'folder_not_empty', message: expect.any(String), files: 0, subfolders: 2 });
    const ok = await t.app.inject({ method: 'DELETE', url: `/api/v1/kb/folders/${child.id}`, headers: auth });
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toEqual({ success: true, affected_agents: [] });
    const gone = await t.app.inject({ method: 'DELETE', url: `/api/v1/kb/folders/${child.id}`, headers: auth });
    expect(gone.statusCode).toBe(404);
    expect(gone.json().error).toBe('not_found');
    expect((await list(top.id)).json().folders.map((f: { name: string }) => f.name)).toEqual(['Child2']);
  });

  test('a delete racing a subfolder create never leaves an orphan', async () => {
    for (let i = 0; i < 5; i++) {
      const top = (await create(`Racy${i}`)).json();
      const [del, sub] = await Promise.all([
        t.app.inject({ method: 'DELETE', url: `/api/v1/kb/folders/${top.id}`, headers: auth }),
        create('Sub', top.id),
      ]);
      if (del.statusCode === 200) expect(sub.statusCode).toBe(404);
      else {
        expect(del.statusCode).toBe(409);
        expect(sub.statusCode).toBe(201);
      }
      const [{ n }] = await db.orm.em
        .fork()
        .execute<{ n: string }[]>('select count(*) as n from kb_folders c where c.parent_id is not null and not exists (select 1 from kb_folders p where p.id = c.parent_id)');
      expect(Number(n)).toBe(0);
    }
  });
});
