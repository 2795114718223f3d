/**
 * Entry of the extraction child process (forked by index.ts with a heap limit). It reads
 * the job from argv, extracts, replies once over IPC and exits. Anything that goes wrong
 * here stays here: the parent turns a crash, an OOM or a timeout into an ExtractionError.
 */
import fs from 'node:fs/promises';
import { closeOcr, extractBuffer, toExtractionError } from './extractors';
import type { ChildJob, ChildReply } from './types';

function reply(msg: ChildReply): Promise<void> {
  return new Promise((resolve) => {
    if (!process.send) {
      process.stdout.write(JSON.stringify(msg) + '\n', () => resolve());
      return;
    }
    process.send(msg, undefined, {}, () => resolve());
  });
}

async function run(job: ChildJob): Promise<ChildReply> {
  const warnings: string[] = [];
  try {
    const buf = await fs.readFile(job.filePath);
    const segments = await extractBuffer(buf, job, { limits: job.limits, warnings, ocrLangPath: job.ocrLangPath, depth: 0 });
    return { ok: true, segments, warnings };
  } catch (err) {
    const e = toExtractionError(err, job.kind);
    return { ok: false, reason: e.reason, detail: e.detail, retryable: e.retryable };
  } finally {
    await closeOcr();
  }
}

async function main(): Promise<void> {
  // If the parent dies, stop (unless a parser blocks the event loop; the parent's
  // SIGKILL on timeout is the real guard).
  process.on('disconnect', () => process.exit(1));
  let job: ChildJob;
  try {
    job = JSON.parse(process.argv[2] ?? '') as ChildJob;
  } catch {
    await reply({ ok: false, reason: 'extraction could not start', detail: 'bad job argument', retryable: true });
    process.exit(2);
  }
  const result = await run(job);
  await reply(result);
  process.exit(0);
}

void main();
