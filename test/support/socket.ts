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
