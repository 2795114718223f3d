import { testLogger } from './secret-log';
import type { FastifyInstance } from 'fastify';
import { OutboxDispatcher } from '../../worker/outbox-dispatcher';
import { indexWorkflowId, kbIndexing } from '../../worker/outbox-sources';
import { workflowResult, type TestWorker } from './temporal';
import { kbIndexStatus, type KbIndexResult, type KbIndexStatus } from '../../workflows/kb-index';

/** A multipart/form-data body built by hand, as a client library would send it. */
export function multipart(parts: Array<{ name: string; value: string | Buffer; filename?: string; type?: string }>): { payload: Buffer; headers: Record<string, string> } {
  const boundary = `----concierge${Math.random().toString(16).slice(2)}`;
  const chunks: Buffer[] = [];
  for (const p of parts) {
    const disposition = `form-data; name="${p.name}"${p.filename !== undefined ? `; filename="${p.filename}"` : ''}`;
    const head = `--${boundary}\r\nContent-Disposition: ${disposition}\r\n${p.filename !== undefined ? `Content-Type: ${p.type ?? 'application/octet-stream'}\r\n` : ''}\r\n`;
    chunks.push(Buffer.from(head), Buffer.isBuffer(p.value) ? p.value : Buffer.from(p.value), Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { payload: Buffer.concat(chunks), headers: { 'content-type': `multipart/form-data; boundary=${boundary}` } };
}

export async function upload(
  app: FastifyInstance,
  auth: Record<string, string>,
  file: { filename: string; content: string | Buffer; type?: string },
  fields: Record<string, string> = {},
) {
  const body = multipart([...Object.entries(fields).map(([name, value]) => ({ name, value })), { name: 'file', value: file.content, filename: file.filename, type: file.type }]);
  return app.inject({ method: 'POST', url: '/api/v1/kb/files', headers: { ...auth, ...body.headers }, payload: body.payload });
}

/** The indexing outbox relay on the test worker's task queue. */
export async function startIndexDispatcher(tw: TestWorker): Promise<OutboxDispatcher> {
  const d = new OutboxDispatcher(tw.composition.notifications!, [kbIndexing(tw.composition.em, tw.client, { taskQueue: tw.taskQueue })], testLogger(), 500);
  await d.start();
  return d;
}

/** Waits for a file's indexing workflow to finish and returns the file's status from its result. */
export async function indexed(tw: TestWorker, fileId: string): Promise<KbIndexStatus> {
  return kbIndexStatus(await workflowResult<KbIndexResult>(tw.client, indexWorkflowId(fileId)));
}
