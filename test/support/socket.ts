import WebSocket from 'ws';

/** A socket upgrade's outcome: the open socket, or the refusal's HTTP status and error body. */
export type Upgrade<T> = { ws: T; status?: undefined; body?: undefined } | { ws?: undefined; status: number; body: { error: string; message: string } };

/**
 * Opens `url` as a WebSocket; a refused upgrade resolves with its status and `{error, message}` body.
 * `origin: null` sends none. `wrap` runs at the open event itself, before any frame can arrive (a
 * reader attached one tick later would miss the frames the server sends at once, e.g. catch-up).
 */
export function upgrade<T = WebSocket>(url: string, origin: string | null, wrap: (ws: WebSocket) => T = (ws) => ws as T): Promise<Upgrade<T>> {
  const socket = new WebSocket(url, origin ? { origin } : {});
  return new Promise((resolve, reject) => {
    socket.once('open', () => resolve({ ws: wrap(socket) }));
    socket.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (chunk: Buffer) => (body += chunk));
      res.on('end', () => {
        socket.on('error', () => undefined);
        socket.terminate();
        resolve({ status: res.statusCode!, body: JSON.parse(body) });
      });
    });
    socket.once('error', reject);
  });
}

/** A widget reply socket on a conversation that collects every frame; `until` waits for a condition on them. */
export async function frameCollector(url: string, origin: string) {
  const frames: Array<Record<string, unknown>> = [];
  const s = new WebSocket(url, { origin });
  s.on('message', (d) => frames.push(JSON.parse(String(d))));
  await new Promise((resolve, reject) => s.once('open', resolve).once('error', reject));
  const until = async (pred: (f: Array<Record<string, unknown>>) => boolean, ms = 20_000) => {
    const deadline = Date.now() + ms;
    while (!pred(frames)) {
      if (Date.now() > deadline) throw new Error(`timed out; frames: ${JSON.stringify(frames)}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  return { frames, until, close: () => s.close() };
}
