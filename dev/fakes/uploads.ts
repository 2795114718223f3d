import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { orderExportCsv } from './documents';

export interface UploadOutcome {
  status: number;
  body: { id?: string; file_size?: number; mime_type?: string; message?: string };
  seconds: number;
}

/**
 * A knowledge-base upload (POST /api/v1/kb/files) of a generated order export: multipart/form-data with a Content-Length,
 * as `curl -F` sends it, whose file part streams `bytes` bytes of CSV (nothing held in memory).
 */
export async function uploadOrderExport(url: string, key: string, name: string, bytes: number): Promise<UploadOutcome> {
  const boundary = `----concierge-bench-${randomBytes(8).toString('hex')}`;
  const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${name}"\r\nContent-Type: text/csv\r\n\r\n`);
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  const started = performance.now();
  const req = http.request(`${url}/api/v1/kb/files`, {
    method: 'POST',
    agent: false,
    headers: { authorization: `Bearer ${key}`, 'content-type': `multipart/form-data; boundary=${boundary}`, 'content-length': String(head.length + bytes + tail.length) },
  });
  const response = new Promise<http.IncomingMessage>((resolve, reject) => req.once('response', resolve).once('error', reject));
  async function* body() {
    yield head;
    yield* orderExportCsv(bytes);
    yield tail;
  }
  // A server that answers early (an error) stops reading: its answer matters more than the send's failure.
  const sending = pipeline(Readable.from(body(), { objectMode: false }), req).catch((err: unknown) => err);
  const res = await response;
  const chunks: Buffer[] = [];
  for await (const c of res) chunks.push(c as Buffer);
  const sendError = await sending;
  const text = Buffer.concat(chunks).toString('utf8');
  if (sendError && res.statusCode === 201) throw sendError;
  let parsed: UploadOutcome['body'];
  try {
    parsed = JSON.parse(text) as UploadOutcome['body'];
  } catch {
    parsed = { message: text.slice(0, 300) };
  }
  return { status: res.statusCode ?? 0, body: parsed, seconds: (performance.now() - started) / 1000 };
}
