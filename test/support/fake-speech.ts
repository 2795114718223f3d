import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A fake OpenAI-compatible speech server on loopback, speaking the real wire protocol:
 * `POST /v1/audio/speech` (a JSON body `{model, input, voice, response_format}`, answered
 * with audio bytes) and `POST /v1/audio/transcriptions` (multipart `file` + `model`,
 * answered `{text}`). Errors use OpenAI's `{error: {message, type, code}}` body.
 */
export interface FakeSpeechRequest {
  path: string;
  authorization?: string;
  /** The JSON body of /v1/audio/speech. */
  json?: any;
  /** The multipart fields of /v1/audio/transcriptions. */
  form?: { model: string; fileName: string; fileType: string; file: Buffer; responseFormat: string | null };
}

export type FakeSpeechAnswer = { status: number; message?: string } | { audio: Buffer; contentType?: string } | { text: string };

export interface FakeSpeechServer {
  /** Base URL (no `/v1`). */
  url: string;
  requests: FakeSpeechRequest[];
  close(): Promise<void>;
}

export async function startFakeSpeechServer(answer: (req: FakeSpeechRequest) => FakeSpeechAnswer | Promise<FakeSpeechAnswer>): Promise<FakeSpeechServer> {
  const requests: FakeSpeechRequest[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const body = Buffer.concat(chunks);
        const seen: FakeSpeechRequest = { path: req.url ?? '', authorization: req.headers.authorization };
        if (req.method === 'POST' && req.url === '/v1/audio/speech') {
          seen.json = JSON.parse(body.toString('utf8'));
        } else if (req.method === 'POST' && req.url === '/v1/audio/transcriptions') {
          const form = await new Response(body, { headers: { 'content-type': String(req.headers['content-type']) } }).formData();
          const file = form.get('file') as File;
          seen.form = {
            model: String(form.get('model')),
            fileName: file.name,
            fileType: file.type,
            file: Buffer.from(await file.arrayBuffer()),
            responseFormat: form.get('response_format') as string | null,
          };
        } else {
          res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'not found', type: 'invalid_request_error', code: null } }));
          return;
        }
        requests.push(seen);
        const a = await answer(seen);
        if ('status' in a) {
          res.writeHead(a.status, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: a.message ?? 'failed', type: 'server_error', code: null } }));
        } else if ('audio' in a) {
          res.writeHead(200, { 'content-type': a.contentType ?? 'audio/wav' }).end(a.audio);
        } else {
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ text: a.text }));
        }
      })();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
