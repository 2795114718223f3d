import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { startTestApp } from '../support/app';

/**
 * Shutdown drains: a request in flight when the API starts closing is answered, and its
 * keep-alive connection is closed with that answer, so the close does not wait for the
 * client's idle connection to time out (Fastify's keepAliveTimeout: 72 s).
 */
let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

test('a keep-alive request in flight at close is answered with Connection: close, and the close ends with it', async () => {
  const t = await startTestApp({ orm: db.orm, databaseUrl: db.url, msgappWebhook: { appSecret: 'app-secret', verifyToken: 'verify' } });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = t.app.server.address() as AddressInfo;
  const socket = net.connect(port, '127.0.0.1');
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  let answer = '';
  socket.on('data', (d: Buffer) => (answer += d.toString('latin1')));
  const ended = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  // Headers and half the body of a webhook (its signature is checked on the whole body): the request is in flight.
  const body = JSON.stringify({ name: 'x' });
  socket.write(`POST /webhooks/msgapp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`);
  socket.write(body.slice(0, 4));
  await waitFor(() => t.app.inFlightRequests().length === 1);

  const started = Date.now();
  const closed = t.close();
  // The rest of the body once the server stopped listening: the answer is written while it closes.
  await waitFor(() => !t.app.server.listening);
  socket.write(body.slice(4));
  await ended;
  await closed;
  expect(answer).toMatch(/^HTTP\/1\.1 \d{3} /);
  expect(answer.toLowerCase()).toContain('connection: close');
  // Far below the 72 s a kept-alive connection would hold the close for.
  expect(Date.now() - started).toBeLessThan(30_000);
});

async function waitFor(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((r) => setTimeout(r, 10));
}
