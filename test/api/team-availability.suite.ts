import { runAdminCli } from '../support/cli';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';

/**
 * The team's availability: business hours in a time zone, the away switch and the typical
 * reply time, per workspace. Read with conversations:read, set with conversations:write (an
 * agent toggles away), by the operator with the admin CLI; one workspace never reads nor
 * changes another's.
 */
let db: TestDatabase;
let t: TestApp;
let wsA: string;
let wsB: string;
let authA: Record<string, string>;
let authB: Record<string, string>;
let readOnlyA: Record<string, string>;

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url });
  wsA = await createWorkspace(db.orm, 'Acme');
  wsB = await createWorkspace(db.orm, 'Globex');
  authA = bearer((await createKey(t.services, wsA, ['conversations:read', 'conversations:write'])).key);
  authB = bearer((await createKey(t.services, wsB, ['conversations:read', 'conversations:write'])).key);
  readOnlyA = bearer((await createKey(t.services, wsA, ['conversations:read'])).key);
});
afterAll(async () => {
  await t.close();
  await db.drop();
});

const URL = '/api/v1/team/availability';
const get = (auth: Record<string, string>) => t.app.inject({ method: 'GET', url: URL, headers: auth });
const put = (auth: Record<string, string>, payload: unknown) => t.app.inject({ method: 'PUT', url: URL, headers: auth, payload: payload as object });
const admin = (args: string[]) => runAdminCli(args, { env: { DATABASE_URL: db.url } });

const DAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'] as const;
/** The UTC day two days from now, and its 10:00Z: an opening that is certainly not now. */
function twoDaysOn(): { day: (typeof DAYS)[number]; at: string } {
  const d = new Date(Date.now() + 2 * 86_400_000);
  return { day: DAYS[d.getUTCDay()], at: `${d.toISOString().slice(0, 10)}T10:00:00.000Z` };
}

describe('GET and PUT /api/v1/team/availability', () => {
  test('a workspace that never set it: UTC, always open, not away', async () => {
    const res = await get(authA);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ timezone: 'UTC', hours: [], away: false, away_message: null, reply_time_minutes: null, available: true, next_available_at: null, updated_at: null });
  });

  test('hours set: outside them, not available, with the next opening; inside them, available', async () => {
    const { day, at } = twoDaysOn();
    const res = await put(authA, { timezone: 'UTC', hours: [{ day, open: '10:00', close: '11:00' }], reply_time_minutes: 15 });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      timezone: 'UTC',
      hours: [{ day, open: '10:00', close: '11:00' }],
      away: false,
      away_message: null,
      reply_time_minutes: 15,
      available: false,
      next_available_at: at,
      updated_at: expect.any(String),
    });
    expect((await get(authA)).json()).toEqual(res.json());
    // The whole week in Paris: open now whatever the hour.
    const open = await put(authA, { timezone: 'Europe/Paris', hours: ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((d) => ({ day: d, open: '00:00', close: '24:00' })) });
    expect(open.json()).toMatchObject({ timezone: 'Europe/Paris', available: true, next_available_at: null, reply_time_minutes: 15 });
  });

  test('an agent toggles away (fields left out keep their value); away wins over the hours', async () => {
    const away = await put(authA, { away: true, away_message: '  Back on Monday  ' });
    expect(away.statusCode).toBe(200);
    expect(away.json()).toMatchObject({ away: true, away_message: 'Back on Monday', timezone: 'Europe/Paris', reply_time_minutes: 15, available: false, next_available_at: null });
    expect((await put(authA, { away: false })).json()).toMatchObject({ away: false, away_message: 'Back on Monday', available: true });
    expect((await put(authA, { away_message: null, reply_time_minutes: null })).json()).toMatchObject({ away_message: null, reply_time_minutes: null });
  });

  test.each([
    [{ timezone: 'Mars/Olympus_Mons' }, /^timezone: 'Mars\/Olympus_Mons' is not an IANA time zone/],
    [{ hours: [{ day: 'mon', open: '25:00', close: '26:00' }] }, /^body\.hours/],
    [{ hours: [{ day: 'mon', open: '09:00', close: '09:00' }] }, /^hours\[0\]: mon 09:00-09:00 is empty/],
    [{ hours: [{ day: 'mon', open: '09:00', close: '17:00' }, { day: 'mon', open: '12:00', close: '13:00' }] }, /^hours: mon 09:00-17:00 overlaps mon 12:00-13:00/],
    [{ hours: [{ day: 'sun', open: '22:00', close: '03:00' }, { day: 'mon', open: '02:00', close: '04:00' }] }, /^hours: sun 22:00-03:00 overlaps mon 02:00-04:00/],
    [{ reply_time_minutes: 0 }, /reply_time_minutes/],
    [{ away: true, colour: 'red' }, /colour/],
  ])('%j is 400 invalid_request naming the field, and changes nothing', async (body, message) => {
    const before = (await get(authA)).json();
    const res = await put(authA, body);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: 'invalid_request', message: expect.stringMatching(message) });
    expect((await get(authA)).json()).toEqual(before);
  });

  test('reading needs conversations:read; changing needs conversations:write', async () => {
    expect((await get(readOnlyA)).statusCode).toBe(200);
    const refused = await put(readOnlyA, { away: true });
    expect(refused.statusCode).toBe(403);
    expect(refused.json().error).toBe('insufficient_scope');
    expect((await get(authA)).json().away).toBe(false);
    const noKey = await get({});
    expect(noKey.statusCode).toBe(401);
  });

  test('two workspaces: B neither reads nor changes A', async () => {
    const before = (await get(authA)).json();
    await put(authA, { away: true, away_message: 'A is away' });
    const b = await get(authB);
    expect(b.json()).toMatchObject({ timezone: 'UTC', hours: [], away: false, away_message: null, updated_at: null });
    expect((await put(authB, { timezone: 'Asia/Tokyo', hours: [], away: false, away_message: 'B here' })).statusCode).toBe(200);
    expect((await get(authA)).json()).toMatchObject({ timezone: before.timezone, hours: before.hours, away: true, away_message: 'A is away' });
    expect((await get(authB)).json()).toMatchObject({ timezone: 'Asia/Tokyo', away: false, away_message: 'B here' });
    await put(authA, { away: false, away_message: null });
  });
});

describe('services.team.statusFor (what the widget tells a visitor)', () => {
  test('available, the next opening, the away message only while away, the reply time', async () => {
    const ws = await createWorkspace(db.orm);
    expect(await t.services.team.statusFor(ws)).toEqual({ available: true, next_available_at: null, away_message: null, reply_time_minutes: null });
    await t.services.team.setAvailability(ws, { timezone: 'Europe/Paris', hours: [{ day: 'mon', open: '09:00', close: '17:30' }], away_message: 'Back soon', reply_time_minutes: 30 });
    // Saturday 2026-11-28 12:00 in Paris: the next opening is Monday 09:00 CET.
    expect(await t.services.team.statusFor(ws, new Date('2026-11-28T11:00:00Z'))).toEqual({ available: false, next_available_at: '2026-11-30T08:00:00.000Z', away_message: null, reply_time_minutes: 30 });
    expect((await t.services.team.statusFor(ws, new Date('2026-11-30T08:30:00Z'))).available).toBe(true);
    await t.services.team.setAvailability(ws, { away: true });
    expect(await t.services.team.statusFor(ws, new Date('2026-11-30T08:30:00Z'))).toEqual({ available: false, next_available_at: null, away_message: 'Back soon', reply_time_minutes: 30 });
  });
});

describe('admin CLI: team availability, team away, team set-hours', () => {
  test('set-hours with the hours syntax, away on and off, then availability shows them', async () => {
    const ws = await createWorkspace(db.orm);
    const set = await admin(['team', 'set-hours', ws, '--timezone', 'Europe/Paris', '--hours', 'mon-fri 09:00-12:00,13:00-17:30', '--hours', 'sat 10:00-14:00', '--reply-time', '20']);
    expect(set.code).toBe(0);
    const out = JSON.parse(set.stdout);
    expect(out).toMatchObject({ timezone: 'Europe/Paris', reply_time_minutes: 20, away: false });
    expect(out.hours).toHaveLength(11);
    expect(out.hours[0]).toEqual({ day: 'mon', open: '09:00', close: '12:00' });
    expect(out.hours[10]).toEqual({ day: 'sat', open: '10:00', close: '14:00' });

    const away = await admin(['team', 'away', ws, '--on', '--message', 'Closed for the holidays']);
    expect(away.code).toBe(0);
    expect(JSON.parse(away.stdout)).toMatchObject({ away: true, away_message: 'Closed for the holidays', available: false, next_available_at: null, hours: out.hours });
    const back = await admin(['team', 'away', ws, '--off']);
    expect(JSON.parse(back.stdout)).toMatchObject({ away: false, away_message: 'Closed for the holidays' });

    const shown = await admin(['team', 'availability', ws]);
    expect(shown.code).toBe(0);
    const { available: _a, next_available_at: _n, ...settings } = JSON.parse(back.stdout);
    expect(JSON.parse(shown.stdout)).toMatchObject(settings);
    // The API reads what the CLI wrote.
    expect(await t.services.team.settings(ws)).toMatchObject({ timezone: 'Europe/Paris', hours: out.hours, reply_time_minutes: 20 });

    const always = await admin(['team', 'set-hours', ws, '--always-open', '--reply-time', 'none']);
    expect(JSON.parse(always.stdout)).toMatchObject({ hours: [], reply_time_minutes: null, timezone: 'Europe/Paris', available: true });
  });

  test.each([
    [['team', 'away', 'WS', '--on', '--off'], 2, 'give exactly one of --on or --off'],
    [['team', 'away', 'WS'], 2, 'give exactly one of --on or --off'],
    [['team', 'set-hours', 'WS'], 2, 'give at least one of --timezone, --hours, --always-open, --reply-time'],
    [['team', 'set-hours', 'WS', '--hours', 'monday 09:00-17:00'], 2, "hours: 'monday' in 'monday 09:00-17:00' is not a day"],
    [['team', 'set-hours', 'WS', '--hours', 'mon 9-5'], 2, "hours: '9-5' in 'mon 9-5' is not TIME-TIME"],
    [['team', 'set-hours', 'WS', '--hours', 'mon 09:00-17:00; mon 16:00-18:00'], 1, 'invalid_request: hours: mon 09:00-17:00 overlaps mon 16:00-18:00'],
    [['team', 'set-hours', 'WS', '--timezone', 'Paris'], 1, "invalid_request: timezone: 'Paris' is not an IANA time zone"],
    [['team', 'set-hours', 'WS', '--reply-time', 'soon'], 2, '--reply-time must be a whole number of minutes, or none'],
    [['team', 'set-hours', 'WS', '--hours', 'mon 09:00-10:00', '--always-open'], 2, 'give --hours or --always-open, not both'],
  ])('%j exits %i: %s', async (args, code, message) => {
    const ws = await createWorkspace(db.orm);
    const res = await admin(args.map((a) => (a === 'WS' ? ws : a)));
    expect(res.code).toBe(code);
    expect(res.stderr).toContain(message);
    expect(await t.services.team.settings(ws)).toMatchObject({ updated_at: null });
  });

  test('an unknown workspace is not_found, for reads too', async () => {
    for (const args of [['team', 'availability', 'ws_000000000000000000000000'], ['team', 'away', 'ws_000000000000000000000000', '--on']]) {
      const res = await admin(args);
      expect(res.code).toBe(1);
      expect(res.stderr).toContain("not_found: No workspace with id 'ws_000000000000000000000000'");
    }
  });
});
