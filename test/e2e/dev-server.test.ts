// npm start's embedded Temporal: SQLite in WAL mode, the Concierge* search attributes registered at start.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { findTemporalCli, startDevServer, type DevServer } from '../../dev/embedded/temporal';
import { ALL_SEARCH_ATTRIBUTES, SEARCH_ATTRIBUTE_FLAGS } from '../../worker/namespace-attributes';

const CODEC = 'http://127.0.0.1:3999/api/temporal-codec/0123456789abcdef0123456789abcdef';
let dir: string;
let dev: DevServer;
beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dev-server-'));
  dev = await startDevServer({
    cli: findTemporalCli({ install: false }),
    dbFile: path.join(dir, 'temporal.db'),
    port: 0,
    uiPort: 0,
    namespace: 'default',
    logFile: path.join(dir, 'temporal.log'),
    searchAttributes: SEARCH_ATTRIBUTE_FLAGS,
    uiCodecEndpoint: CODEC,
  });
}, 60_000);
afterAll(async () => {
  await dev?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('the state file is in WAL mode and every search attribute is registered before any worker runs', async () => {
  const mode = execFileSync('python3', ['-c', 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("pragma journal_mode").fetchone()[0])', path.join(dir, 'temporal.db')])
    .toString()
    .trim();
  expect(mode).toBe('wal');
  const connection = await Connection.connect({ address: dev.address });
  try {
    const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace: 'default' });
    for (const key of ALL_SEARCH_ATTRIBUTES) expect(customAttributes?.[key.name]).toBeDefined();
  } finally {
    await connection.close();
  }
}, 60_000);

test('the embedded server listens on 127.0.0.1 only (frontend, UI, HTTP API, metrics): it authenticates no one', async () => {
  // Every listening TCP socket of the dev server process (and its children), with its local address.
  const out = execFileSync('ss', ['-ltnpH']).toString();
  const mine = out.split('\n').filter((l) => new RegExp(`pid=${dev.process.pid}\\b`).test(l));
  const locals = mine.map((l) => l.trim().split(/\s+/)[3]);
  expect(locals).toContainEqual(dev.address);
  expect(locals).toContainEqual(dev.uiUrl.replace('http://', ''));
  for (const local of locals) expect(local).toMatch(/^127\.0\.0\.1:\d+$/);
});

test('its UI decodes payloads through the codec endpoint it was given (--ui-codec-endpoint)', async () => {
  const settings = (await (await fetch(`${dev.uiUrl}/api/v1/settings`)).json()) as { Codec?: { Endpoint?: string } };
  expect(settings.Codec?.Endpoint).toBe(CODEC);
});
